// Bearer API key authentication for /api/v1: one hook, one uniform 401, scope by method.

import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { apiKeyPattern, hashApiKey, isLiveKey, parseAuthorization } from '../api-keys/api-key.js'
import type { KeyWithAccount } from '../api-keys/api-keys.store.js'
import { type KeyVerifier, NOT_CACHED } from '../api-keys/key-verifier.js'
import type { RateLimiter } from '../rate-limit/rate-limit.js'
import { accountConcurrency } from './connection-limits.js'
import { AppError } from './errors.js'

export type AuthContext = KeyWithAccount

const contexts = new WeakMap<FastifyRequest, AuthContext>()
const concurrencySlots = new WeakMap<FastifyRequest, () => void>()

/** The authenticated key and account of a request; routes under the auth hook always have one. */
export function authOf(request: FastifyRequest): AuthContext {
  const context = contexts.get(request)
  if (!context) {
    throw new Error(`route ${request.url} is not behind requireApiKey`)
  }
  return context
}

const READ_METHODS = new Set(['GET', 'HEAD'])

/**
 * Adds the hook to a plugin scope: one 401 for every failure, 429 for an IP that keeps failing, and
 * the RateLimit headers of the budget spent (docs/design.md#authentication).
 */
export function requireApiKey(
  scope: FastifyInstance,
  deps: {
    keyVerifier: KeyVerifier
    rateLimiter: RateLimiter
    config: { keyPrefix: string; maxConcurrentRequestsPerAccount: number }
  },
): void {
  const pattern = apiKeyPattern(deps.config.keyPrefix)
  const enterAccount = accountConcurrency(deps.config.maxConcurrentRequestsPerAccount)

  async function admit(request: FastifyRequest, reply: FastifyReply, found: AuthContext | undefined): Promise<void> {
    if (!found) {
      // The IP's failed-auth budget goes in the RateLimit headers of the 401 (or 429) itself.
      const wait = await deps.rateLimiter.failedAuthLimited(request.ip, reply)
      if (wait > 0) {
        const retryAfter = String(wait)
        throw new AppError(
          'rate_limited',
          `Too many failed authentications from this address; retry after ${retryAfter} s.`,
          {
            headers: { 'retry-after': retryAfter },
          },
        )
      }
      throw new AppError('invalid_api_key', 'Send a valid API key in the header Authorization: Bearer <key>.', {
        headers: { 'www-authenticate': 'Bearer realm="api"' },
      })
    }
    contexts.set(request, found)
    // Each mode is a tenant of its own: its own budget and its own share of the server.
    concurrencySlots.set(request, enterAccount(found.tenant.id, reply))
    await deps.rateLimiter.takeAccount(found.tenant.id, reply)
    const needed = READ_METHODS.has(request.method) ? 'read' : 'write'
    if (!found.key.scopes.includes(needed)) {
      throw new AppError(
        'insufficient_scope',
        `This API key is read-only; ${request.method} needs a key with write access.`,
      )
    }
  }

  // Not async, and the key's cached verification read without a promise (verifyCached): every
  // request of a busy key takes this path (docs/performance.md, round 3).
  scope.addHook('onRequest', (request, reply, done) => {
    const header = request.headers.authorization
    let known = lastKeys.get(request.raw.socket)
    if (known === undefined || known.header !== header) {
      const parsed = parseAuthorization(header, pattern)
      known =
        parsed.ok && header !== undefined ? { header, key: parsed.key, keyHash: hashApiKey(parsed.key) } : undefined
      if (known !== undefined) {
        lastKeys.set(request.raw.socket, known)
      }
    }
    const cached = known === undefined ? undefined : deps.keyVerifier.verifyCached(known.keyHash)
    // A key acts in the mode its word names and no other, whatever its stored row says.
    const inItsMode = (found: AuthContext | undefined) =>
      found && known && isLiveKey(known.key, deps.config.keyPrefix) === found.tenant.livemode ? found : undefined
    const admitted =
      cached === NOT_CACHED && known !== undefined
        ? deps.keyVerifier.verify(known.key).then((found) => admit(request, reply, inItsMode(found)))
        : admit(request, reply, cached === NOT_CACHED ? undefined : inItsMode(cached))
    admitted.then(() => done(), done)
  })
}

/**
 * The last well-formed Authorization header of each connection and its key's digest, so a keep-alive
 * client's header is parsed and hashed once. The key is still verified on every request.
 */
const lastKeys = new WeakMap<Socket, { header: string; key: string; keyHash: string }>()

/**
 * Adds to a plugin scope under requireApiKey: every route in it needs a full-access key (the write
 * scope), reads included, for resources that are an admin's business (`what` names them).
 */
export function requireFullAccess(scope: FastifyInstance, what: string): void {
  scope.addHook('onRequest', async (request) => {
    if (!authOf(request).key.scopes.includes('write')) {
      throw new AppError(
        'insufficient_scope',
        `${what} need a key with full access, even to read: this API key is read-only.`,
      )
    }
  })
}

/** The key and account of a request if it was authenticated; undefined if it was not (yet). */
/**
 * Gives up the request's place among its account's requests in progress (accountConcurrency) before
 * the response is written: for a long poll, which holds nothing while it waits.
 */
export const releaseConcurrencySlot = (request: FastifyRequest): void => concurrencySlots.get(request)?.()

export const authIfAny = (request: FastifyRequest): AuthContext | undefined => contexts.get(request)

/** The tenant id of an authenticated request: its key's account in the key's mode. */
export const tenantIdOf = (request: FastifyRequest): string | undefined => contexts.get(request)?.tenant.id
