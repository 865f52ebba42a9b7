// Bounds on what one client can make this process hold in memory: a response waits in the process
// until the client reads it, so a client that pipelines requests and never reads the answers made
// the server build and keep every one (docs/design.md#fair-share; figures in docs/rate-limits.md).
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { AppError } from './errors.js'
import { onResponseClosed } from './response-closed.js'

/**
 * Requests a connection may have waiting for their responses. Common clients send one at a time; one
 * that pipelines deeper is cut off, as RFC 9112 §9.6 allows (it retries on a new connection).
 */
export const MAX_UNANSWERED_PER_CONNECTION = 32

const unanswered = new WeakMap<Socket, number>()

/** The first hook of all: counts a connection's requests until each response is written or dropped. */
export function limitPipelining(app: FastifyInstance, max = MAX_UNANSWERED_PER_CONNECTION): void {
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket
    const count = (unanswered.get(socket) ?? 0) + 1
    if (count > max) {
      // No answer: the client is not reading them. Hijacked, so Fastify sends nothing and runs no
      // later hook; the destroyed connection drops the responses already waiting on it.
      reply.hijack()
      socket.destroy()
      return
    }
    unanswered.set(socket, count)
    // 'close' comes once the response is handed to the OS, or once the connection is gone.
    onResponseClosed(reply.raw, () => unanswered.set(socket, (unanswered.get(socket) ?? 1) - 1))
    done()
  })
}

/**
 * Requests of one account in progress in this process at once, from authentication until the
 * response is written out (MAX_CONCURRENT_REQUESTS_PER_ACCOUNT; 0: off). It bounds what one account's
 * unread answers and slow requests can take, whatever its connections. Beyond it: 429. Returns the
 * request's early release (idempotent): a long poll gives its place up while it waits, holding
 * nothing but a timer (src/events/events.routes.ts).
 */
export function accountConcurrency(max: number): (accountId: string, reply: FastifyReply) => () => void {
  const inProgress = new Map<string, number>()
  return (accountId, reply) => {
    if (max === 0) {
      return () => {}
    }
    const count = (inProgress.get(accountId) ?? 0) + 1
    if (count > max) {
      throw new AppError(
        'rate_limited',
        `This account has ${max} requests in progress, the most one process serves at once; retry after 1 s.`,
        { headers: { 'retry-after': '1' } },
      )
    }
    inProgress.set(accountId, count)
    let released = false
    const release = () => {
      if (released) {
        return
      }
      released = true
      const left = (inProgress.get(accountId) ?? 1) - 1
      if (left === 0) {
        inProgress.delete(accountId)
      } else {
        inProgress.set(accountId, left)
      }
    }
    // A client that left while its key was being looked up has already closed the response.
    onResponseClosed(reply.raw, release)
    return release
  }
}
