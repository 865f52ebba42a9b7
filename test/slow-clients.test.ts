// A client that trickles its request cannot hold a connection for long:
// the headers must arrive within min(10 s, REQUEST_TIMEOUT_MS), the whole request within
// REQUEST_TIMEOUT_MS; meanwhile other clients are served as usual. On a real port, as a client.

import type { AddressInfo } from 'node:net'
import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'

describe('slow clients', () => {
  let t: TestHarness
  let acme: TestAccount
  let port = 0
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', env: { REQUEST_TIMEOUT_MS: '1500' } })
    acme = await t.createAccount()
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    port = (t.app.server.address() as AddressInfo).port
  })
  afterAll(() => t.close())

  /** Sends `text` one byte every `everyMs` until the server closes the socket; resolves with when and what it answered. */
  const trickle = (text: string, everyMs: number) =>
    new Promise<{ closedAfterMs: number; answer: string }>((resolve) => {
      const started = Date.now()
      const socket: Socket = connect(port, '127.0.0.1')
      let answer = ''
      let at = 0
      const timer = setInterval(() => {
        if (at < text.length && !socket.destroyed) {
          socket.write(text[at++] ?? '')
        }
      }, everyMs)
      socket.on('data', (chunk) => {
        answer += chunk.toString()
      })
      socket.on('error', () => {})
      socket.on('close', () => {
        clearInterval(timer)
        resolve({ closedAfterMs: Date.now() - started, answer })
      })
    })

  it('cuts off a client trickling its headers, and serves others meanwhile', async () => {
    // 300 bytes at one per 50 ms would take 15 s.
    const slow = trickle(`GET /api/v1/me HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(260)}\r\n\r\n`, 50)
    const me = await fetch(`http://127.0.0.1:${port}/api/v1/me`, { headers: { authorization: `Bearer ${acme.key}` } })
    expect(me.status).toBe(200)
    const { closedAfterMs, answer } = await slow
    expect(closedAfterMs).toBeLessThan(4000)
    expect(closedAfterMs).toBeGreaterThanOrEqual(1400)
    // The client is still connected, so it is told why: a 408 problem, like any other error.
    expectConnectionProblem(answer, 408, 'request_timeout')
  })

  /** Sends raw bytes, reads until the server closes. */
  const raw = (text: string) =>
    new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(text))
      let answer = ''
      socket.on('data', (chunk) => {
        answer += chunk.toString()
      })
      socket.on('error', () => {})
      socket.on('close', () => resolve(answer))
    })

  /** A response Node's HTTP parser refused to hand to the app: still a problem with a request id. */
  function expectConnectionProblem(answer: string, status: number, code: string): void {
    const [head = '', body = ''] = answer.split('\r\n\r\n')
    expect(head.split('\r\n')[0]).toMatch(new RegExp(`^HTTP/1.1 ${status} `))
    expect(head).toMatch(/\r\ncontent-type: application\/problem\+json; charset=utf-8/i)
    expect(head).toMatch(/\r\ncache-control: no-store/i)
    expect(head).toMatch(/\r\nx-content-type-options: nosniff/i)
    const requestId = /\r\nrequest-id: (req_\w+)/i.exec(head)?.[1]
    expect(requestId).toBeDefined()
    const problem = JSON.parse(body)
    expect(problem).toMatchObject({ status, code, request_id: requestId, type: expect.stringContaining(code) })
  }

  it('headers over 16 KiB get a 431 problem, not Fastify\'s {"error": …}', async () => {
    const answer = await raw(`GET /api/v1/me HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`)
    expectConnectionProblem(answer, 431, 'headers_too_large')
  })

  it('a request whose framing is broken gets a 400 problem and the connection closes', async () => {
    const answer = await raw('GET /api/v1/me HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n')
    expectConnectionProblem(answer, 400, 'invalid_request')
  })

  it('cuts off a client trickling its body', async () => {
    const body = JSON.stringify({ email: 'slow@example.com', first_name: 'x'.repeat(200) })
    const head = `POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    socket.write(head)
    socket.on('error', () => {})
    const started = Date.now()
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)))
    let at = 0
    const timer = setInterval(() => {
      if (at < body.length && !socket.destroyed) {
        socket.write(body[at++] ?? '')
      }
    }, 50)
    const closedAfterMs = await closed
    clearInterval(timer)
    expect(closedAfterMs).toBeLessThan(4000)
    // Nothing was written for the request that never arrived whole.
    const list = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
    expect(list.json().contacts).toEqual([])
  })
})
