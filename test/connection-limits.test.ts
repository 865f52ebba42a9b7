// What one client can make the process hold (src/http/connection-limits.ts), on a real port, as a
// client: a connection with more than 32 requests waiting for their answers is closed; an account
// with more than MAX_CONCURRENT_REQUESTS_PER_ACCOUNT requests in progress gets 429; the OpenAPI
// document (no key needed) is the same bytes every time, with an ETag. Before, 80 connections
// pipelining 250 requests each for the document, never reading, grew the process by 3.3 GB.
import { type AddressInfo, connect } from 'node:net'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CACHE_TTL_PUSHED_MS } from '../src/api-keys/key-verifier.js'
import { MAX_UNANSWERED_PER_CONNECTION } from '../src/http/connection-limits.js'
import { manualClock } from '../src/lib/clock.js'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'

describe('connection limits', () => {
  let t: TestHarness
  let acme: TestAccount
  let port = 0
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', env: { MAX_CONCURRENT_REQUESTS_PER_ACCOUNT: '2' } })
    acme = await t.createAccount()
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    port = (t.app.server.address() as AddressInfo).port
  })
  afterAll(() => t.close())

  /**
   * Writes `requests` GETs of `path` at once on one connection, reads nothing for `pauseMs`, then
   * reads until the server closes the connection or 3 s pass; counts the answers.
   */
  const pipeline = (path: string, requests: number, pauseMs: number) =>
    new Promise<{ answered: number; closedByServer: boolean }>((resolve) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(requests)),
      )
      let text = ''
      let closedByServer = false
      socket.pause()
      setTimeout(() => socket.resume(), pauseMs)
      const giveUp = setTimeout(() => socket.destroy(), pauseMs + 3000)
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1')
      })
      socket.on('error', () => {
        closedByServer = true // reset by the server
      })
      socket.on('end', () => {
        closedByServer = true
      })
      socket.on('close', () => {
        clearTimeout(giveUp)
        resolve({ answered: text.split('HTTP/1.1 200').length - 1, closedByServer })
      })
    })

  it('closes a connection with more than 32 requests waiting for answers it does not read', async () => {
    expect(MAX_UNANSWERED_PER_CONNECTION).toBe(32)
    const flood = await pipeline('/api/v1/openapi.json', 40, 500)
    expect(flood).toMatchObject({ closedByServer: true })
    expect(flood.answered).toBeLessThan(40)
    // Within the bound, a client gets every answer, however late it reads, and keeps its connection.
    const polite = await pipeline('/api/v1/openapi.json', 8, 500)
    expect(polite).toEqual({ answered: 8, closedByServer: false })
    // And the server serves others as before.
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200)
  })

  it('serves the OpenAPI document as the same bytes with a strong ETag, and 304 on If-None-Match', async () => {
    const first = await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`)
    const second = await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`)
    const tag = first.headers.get('etag')
    expect(tag).toMatch(/^"[\w-]{22}"$/)
    expect(second.headers.get('etag')).toBe(tag)
    expect(await first.text()).toBe(await second.text())
    const again = await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`, {
      headers: { 'if-none-match': tag ?? '' },
    })
    expect(again.status).toBe(304)
    expect(await again.text()).toBe('')
  })

  it("refuses an account's requests beyond its concurrent ones in progress with 429, and counts them down", async () => {
    // Two creates held in progress: authenticated, their bodies not yet sent.
    const body = JSON.stringify({ email: 'held@example.com' })
    const held = [0, 1].map(
      () =>
        new Promise<string>((resolve) => {
          let answer = ''
          const socket = connect(port, '127.0.0.1', () =>
            socket.write(
              `POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme.key}\r\n` +
                `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
            ),
          )
          socket.on('data', (chunk) => {
            answer += chunk
          })
          socket.on('close', () => resolve(answer))
          setTimeout(() => socket.write(body), 500)
        }),
    )
    await new Promise((resolve) => setTimeout(resolve, 250))
    const refused = await fetch(`http://127.0.0.1:${port}/api/v1/me`, {
      headers: { authorization: `Bearer ${acme.key}` },
    })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(((await refused.json()) as { code: string }).code).toBe('rate_limited')
    // Another account is not affected.
    const other = await t.createAccount()
    expect((await t.inject(other, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    const answers = await Promise.all(held)
    expect(answers.map((answer) => answer.split('\r\n')[0])).toEqual(
      expect.arrayContaining([expect.stringMatching(/^HTTP\/1.1 (201|409)/)]),
    )
    const after = await fetch(`http://127.0.0.1:${port}/api/v1/me`, {
      headers: { authorization: `Bearer ${acme.key}` },
    })
    expect(after.status).toBe(200)
  })
})

describe.each(testDialects())('an account slot on %s', (dialect) => {
  it('is given back when the client leaves while its key is being looked up', async () => {
    const clock = manualClock(new Date())
    const t = await createTestHarness({ dialect, clock, env: { MAX_CONCURRENT_REQUESTS_PER_ACCOUNT: '2' } })
    try {
      const acme = await t.createAccount()
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = t.app.server.address() as AddressInfo
      const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
      // The key is not cached, and its lookup waits behind a transaction holding the key table
      // (SQLite's and PGlite's one connection; PostgreSQL's lock) while three clients send GET /me
      // and leave. Each response closed before its request took the account's place, which was then
      // never given back: two such were enough to lock the account out of this process.
      clock.advance(CACHE_TTL_PUSHED_MS)
      await t.db.transaction().execute(async (trx) => {
        if (dialect !== 'sqlite') {
          await sql`lock table api_keys in access exclusive mode`.execute(trx)
        }
        const sockets = [0, 1, 2].map(() => {
          const socket = connect(port, '127.0.0.1', () =>
            socket.write(`GET /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme.key}\r\n\r\n`),
          )
          return socket
        })
        await wait(300)
        for (const socket of sockets) {
          socket.destroy()
        }
        await wait(100)
      })
      await wait(100)
      const after = await fetch(`http://127.0.0.1:${port}/api/v1/me`, {
        headers: { authorization: `Bearer ${acme.key}` },
      })
      expect(after.status).toBe(200)
    } finally {
      await t.close()
    }
  })
})
