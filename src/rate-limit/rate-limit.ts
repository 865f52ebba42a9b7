// Rate limits for /api/v1: a token bucket per account with the IETF RateLimit headers, and one per
// client IP for failed authentications (docs/design.md#rate-limits).
import type { FastifyReply } from 'fastify'
import { AppError } from '../http/errors.js'
import { clientKey } from './client-key.js'
import type { BucketPolicy, Spend, TakeResult, TokenBuckets } from './token-bucket.js'

const FAILED_AUTH_WINDOW_S = 60

/** Failed authentications per IP: `perMinute` at once, refilled evenly over the minute. */
const failedAuthPolicy = (perMinute: number): BucketPolicy => ({
  rate: perMinute / FAILED_AUTH_WINDOW_S,
  burst: perMinute,
})

/**
 * The longest Retry-After a rate limit sends: a failed-auth bucket (≥ 1 a minute) earns a token
 * back within the minute, an account's (≥ 1 a second, RATE_LIMIT_PER_SECOND) within a second.
 */
export const RETRY_AFTER_MAX_S = FAILED_AUTH_WINDOW_S

/** The draft's RateLimit-Policy for a token bucket: q = the burst, w = seconds to refill it. */
const policyHeader = (name: string, policy: BucketPolicy): string =>
  `"${name}";q=${policy.burst};w=${Math.max(1, Math.ceil(policy.burst / Math.max(policy.rate, 1e-9)))}`

/** RateLimit: what is left of the budget and when it is full again (when the next token comes, once spent). */
const rateLimitHeader = (name: string, taken: TakeResult): string =>
  `"${name}";r=${taken.remaining};t=${taken.allowed ? taken.reset : taken.retryAfter}`

export interface RateLimiter {
  /**
   * Spends `cost` of the account's budget; throws rate_limited, spending nothing, when it holds less.
   * A cost above the burst needs a full bucket and leaves it in debt.
   */
  takeAccount(accountId: string, reply: FastifyReply, cost?: number): Promise<void>
  /** Spends `cost` after the work is done (a long scan); never refuses: the bucket goes into debt. */
  chargeAccount(accountId: string, reply: FastifyReply, cost: number): Promise<void>
  /**
   * Records a failed authentication and sends the IP's failed-auth budget in the RateLimit
   * headers; seconds to wait when the IP has used up its failures, else 0.
   */
  failedAuthLimited(ip: string, reply: FastifyReply): Promise<number>
}

export function createRateLimiter(
  buckets: TokenBuckets,
  policy: BucketPolicy,
  authFailuresPerMinute: number,
  onError: (error: unknown) => void,
  onReject: (kind: 'account' | 'failed_auth') => void,
): RateLimiter {
  const enabled = policy.rate > 0 && policy.burst > 0
  const accountPolicy = policyHeader('account', policy)
  const authPolicy = failedAuthPolicy(authFailuresPerMinute)
  const authPolicyHeader = policyHeader('failed_auth', authPolicy)

  // Fail open: when the shared store is down the API keeps serving (and the error is logged),
  // because refusing every request would turn a Redis outage into a full outage.
  const safeTake = async (
    key: string,
    p: BucketPolicy,
    cost = 1,
    spend: Spend = 'take',
  ): Promise<TakeResult | undefined> => {
    try {
      return await buckets.take(key, p, cost, spend)
    } catch (error) {
      onError(error)
      return undefined
    }
  }

  const sendAccountBudget = (reply: FastifyReply, taken: TakeResult): void => {
    reply.header('ratelimit-policy', accountPolicy)
    reply.header('ratelimit', rateLimitHeader('account', taken))
  }

  const chargeAccount = async (accountId: string, reply: FastifyReply, cost: number): Promise<void> => {
    if (!enabled || cost <= 0) {
      return
    }
    const taken = await safeTake(`acct:${accountId}`, policy, cost, 'charge')
    if (taken) {
      sendAccountBudget(reply, taken)
    }
  }

  return {
    async takeAccount(accountId, reply, cost = 1) {
      if (!enabled) {
        return
      }
      const taken = await safeTake(`acct:${accountId}`, policy, Math.min(cost, policy.burst))
      if (!taken) {
        return
      }
      sendAccountBudget(reply, taken)
      if (!taken.allowed) {
        onReject('account')
        const needs = cost > 1 ? `; this request needs ${Math.min(cost, policy.burst)}` : ''
        throw new AppError(
          'rate_limited',
          `This account is over its rate limit of ${policy.rate} requests per second (burst ${policy.burst})${needs}; retry after ${taken.retryAfter} s.`,
          { headers: { 'retry-after': String(taken.retryAfter) } },
        )
      }
      await chargeAccount(accountId, reply, cost - policy.burst)
    },
    chargeAccount,
    async failedAuthLimited(ip, reply) {
      if (authFailuresPerMinute <= 0) {
        return 0
      }
      const taken = await safeTake(`ip:${clientKey(ip)}`, authPolicy)
      if (!taken) {
        return 0
      }
      reply.header('ratelimit-policy', authPolicyHeader)
      reply.header('ratelimit', rateLimitHeader('failed_auth', taken))
      if (!taken.allowed) {
        onReject('failed_auth')
        return taken.retryAfter
      }
      return 0
    },
  }
}
