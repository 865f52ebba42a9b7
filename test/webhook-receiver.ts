// A real local webhook receiver for tests: records every request and answers as the test scripts.
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceivedDelivery {
  path: string
  headers: http.IncomingHttpHeaders
  body: string
  at: number
}

/**
 * What to answer: a status and body (after `delayMs`, a slow receiver), or 'hang' (never answer), or
 * 'close' (drop the connection).
 */
export type ReceiverAnswer =
  | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number }
  | 'hang'
  | 'close'

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>` */
  url: string
  received: ReceivedDelivery[]
  /** Sets how the next requests are answered (default 200 "ok"); a function decides per request. */
  answer(answer: ReceiverAnswer | ((delivery: ReceivedDelivery) => ReceiverAnswer)): void
  /** Resolves once `count` requests (in all) have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedDelivery[]>
  close(): Promise<void>
}

export async function startReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedDelivery[] = []
  let decide: (delivery: ReceivedDelivery) => ReceiverAnswer = () => ({ status: 200, body: 'ok' })
  const waiters = new Set<() => void>()
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const delivery = {
        path: request.url ?? '/',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      }
      received.push(delivery)
      for (const waiter of waiters) {
        waiter()
      }
      const answer = decide(delivery)
      if (answer === 'hang') {
        return
      }
      if (answer === 'close') {
        request.socket.destroy()
        return
      }
      const respond = () => {
        if (!response.destroyed) {
          response.writeHead(answer.status, answer.headers ?? {})
          response.end(answer.body ?? '')
        }
      }
      if (answer.delayMs) {
        setTimeout(respond, answer.delayMs)
      } else {
        respond()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer(answer) {
      decide = typeof answer === 'function' ? answer : () => answer
    },
    waitFor(count, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (received.length >= count) {
            clearTimeout(timer)
            waiters.delete(check)
            resolve(received.slice())
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`expected ${count} deliveries, received ${received.length}`))
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
    close() {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}
