// A client that trickles its request cannot hold a connection for long (issue 12, slow clients):
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
    // Node answers 408 Request Timeout before it closes, when it can.
    expect(answer === '' || answer.startsWith('HTTP/1.1 408')).toBe(true)
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
