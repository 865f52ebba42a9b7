// Bounds on what one client can make this process hold in memory. A response waits in the process
// until the client reads it: a client that sends requests and never reads the answers (HTTP/1.1
// pipelining: many requests written at once on one connection) made the server build every answer
// and keep it. 80 connections × 250 pipelined GET /api/v1/openapi.json grew the process from 0.8 to
// 4.1 GB in 42 s and froze it for 100 s more, with no API key; with a key, 40 connections × 5 pages
// of 1.5 MB held 442 MB (outside review, 24 November). Each bound below stops one of those.
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { AppError } from './errors.js'

/**
 * Requests a connection may have waiting for their responses to be written out. Browsers and the
 * common HTTP clients send one request at a time per connection; a client that pipelines deeper
 * and does not read is cut off (the connection closed, as RFC 9112 §9.6 allows: a pipelining
 * client retries what was not answered on a new connection).
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
    reply.raw.once('close', () => unanswered.set(socket, (unanswered.get(socket) ?? 1) - 1))
    done()
  })
}

/**
 * Requests of one account in progress in this process at once (MAX_CONCURRENT_REQUESTS_PER_ACCOUNT;
 * 0 turns it off): a request counts from its authentication until its response is written out or
 * dropped. It bounds what one account's unread answers can hold (64 pages of 100 contacts of the
 * largest size are ~190 MB) and how much of the process one account's slow requests can take,
 * whatever the number of its connections. Beyond it: 429, retry after a second. Per process: with
 * several instances an account may have this many in each.
 */
export function accountConcurrency(max: number): (accountId: string, reply: FastifyReply) => void {
  const inProgress = new Map<string, number>()
  return (accountId, reply) => {
    if (max === 0) {
      return
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
    reply.raw.once('close', () => {
      const left = (inProgress.get(accountId) ?? 1) - 1
      if (left === 0) {
        inProgress.delete(accountId)
      } else {
        inProgress.set(accountId, left)
      }
    })
  }
}
