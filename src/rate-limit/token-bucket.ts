// Token buckets: in memory for one instance, in Redis (one atomic script) for several.
import type { Redis } from 'ioredis'

export interface BucketPolicy {
  rate: number
  /** Bucket size: the burst allowed after a quiet period. */
  burst: number
}

export interface TakeResult {
  allowed: boolean
  remaining: number
  /** Seconds until a token is available (0 when allowed). */
  retryAfter: number
  reset: number
}

/**
 * `take` spends `cost` only when the bucket holds that many (else nothing); `charge` always spends,
 * for work already done, and may leave the bucket in debt down to minus its burst.
 */
export type Spend = 'take' | 'charge'

export interface TokenBuckets {
  take(key: string, policy: BucketPolicy, cost?: number, spend?: Spend): Promise<TakeResult>
  close(): Promise<void>
}

/** A lease takes at most 1/LEASE_SHARE of the bucket's tokens (token-lease.ts). */
export const LEASE_SHARE = 10

const spendTokens = (tokens: number, cost: number, spend: Spend, burst: number): { left: number; allowed: boolean } =>
  spend === 'charge'
    ? { left: Math.max(-burst, tokens - cost), allowed: true }
    : tokens >= cost
      ? { left: tokens - cost, allowed: true }
      : { left: tokens, allowed: false }

export function result(tokens: number, allowed: boolean, policy: BucketPolicy, cost: number): TakeResult {
  return {
    allowed,
    remaining: Math.max(0, Math.floor(tokens)),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((cost - tokens) / policy.rate)),
    reset: Math.ceil((policy.burst - tokens) / policy.rate),
  }
}

export function memoryBuckets(now: () => number = Date.now): TokenBuckets {
  const buckets = new Map<string, { tokens: number; at: number }>()
  return {
    async take(key, policy, cost = 1, spend = 'take') {
      const t = now()
      const bucket = buckets.get(key) ?? { tokens: policy.burst, at: t }
      const tokens = Math.min(policy.burst, bucket.tokens + ((t - bucket.at) / 1000) * policy.rate)
      const { left, allowed } = spendTokens(tokens, cost, spend, policy.burst)
      // Re-inserted: the Map stays ordered by last use, so the oldest can be dropped.
      buckets.delete(key)
      buckets.set(key, { tokens: left, at: t })
      if (buckets.size > 100_000) {
        const oldest = buckets.keys().next().value
        if (oldest !== undefined) {
          buckets.delete(oldest)
        }
      }
      return result(left, allowed, policy, cost)
    },
    async close() {},
  }
}

// KEYS[1] bucket; ARGV rate, burst, cost, spend ('take' | 'charge'), as spendTokens above; then,
// for leases (token-lease.ts), `returned` (unspent tokens of an earlier lease, credited first, the
// bucket still capped at its burst) and `leaseMax`: a take that succeeds is granted
// max(cost, min(leaseMax, floor(tokens / LEASE_SHARE))) tokens, so a lease never holds more than a
// tenth of what the bucket had, and below 2 × LEASE_SHARE tokens it is the cost alone (no lease).
// Redis's own clock, so every instance agrees on time. Returns allowed, the tokens left after the
// grant, and the grant (0 when refused).
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil then tokens = burst; at = now end
tokens = math.min(burst, tokens + (now - at) / 1000 * rate + tonumber(ARGV[5] or '0'))
local cost = tonumber(ARGV[3])
local allowed = 0
local granted = 0
if ARGV[4] == 'charge' then tokens = math.max(-burst, tokens - cost); allowed = 1; granted = cost
elseif tokens >= cost then
  granted = math.max(cost, math.min(tonumber(ARGV[6] or '0'), math.floor(tokens / ${LEASE_SHARE})))
  tokens = tokens - granted; allowed = 1
end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'a', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return { allowed, tostring(tokens), tostring(granted) }
`

/** One round trip to the shared bucket: what the script above answers. */
export interface BucketGrant {
  allowed: boolean
  /** The bucket's tokens after the grant (negative in debt). */
  tokens: number
  /** Tokens spent from the bucket: the cost, or a lease of more (0 when refused). */
  granted: number
}

export interface RedisBucketStore {
  take(
    key: string,
    policy: BucketPolicy,
    cost: number,
    spend: Spend,
    returned: number,
    leaseMax: number,
  ): Promise<BucketGrant>
}

/** The shared buckets' one script. A Redis failure is thrown. */
export function redisBucketStore(redis: Redis, prefix = 'contacts-api:rl:'): RedisBucketStore {
  redis.defineCommand('takeToken', { numberOfKeys: 1, lua: TAKE_SCRIPT })
  const script = redis as unknown as {
    takeToken(
      key: string,
      rate: number,
      burst: number,
      cost: number,
      spend: Spend,
      returned: number,
      leaseMax: number,
    ): Promise<[number, string, string]>
  }
  return {
    async take(key, policy, cost, spend, returned, leaseMax) {
      const [allowed, tokens, granted] = await script.takeToken(
        prefix + key,
        policy.rate,
        policy.burst,
        cost,
        spend,
        returned,
        leaseMax,
      )
      return { allowed: allowed === 1, tokens: Number(tokens), granted: Number(granted) }
    },
  }
}

/** Shared across instances, one round trip per take. A Redis failure is thrown; the caller decides to fail open. */
export function redisBuckets(redis: Redis, prefix = 'contacts-api:rl:'): TokenBuckets {
  const store = redisBucketStore(redis, prefix)
  return {
    async take(key, policy, cost = 1, spend = 'take') {
      const { allowed, tokens } = await store.take(key, policy, cost, spend, 0, 0)
      return result(tokens, allowed, policy, cost)
    },
    async close() {},
  }
}
