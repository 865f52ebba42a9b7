// Token buckets: in memory for one instance, in Redis (one atomic script) for several.
import type { Redis } from 'ioredis'

export interface BucketPolicy {
  /** Tokens added per second. */
  rate: number
  /** Bucket size: the burst allowed after a quiet period. */
  burst: number
}

export interface TakeResult {
  allowed: boolean
  /** Whole tokens left after this request. */
  remaining: number
  /** Seconds until a token is available (0 when allowed). */
  retryAfter: number
  /** Seconds until the bucket is full again. */
  reset: number
}

/**
 * How a request spends tokens: `take` spends `cost` only when the bucket holds that many (else
 * refused, nothing spent); `charge` always spends, after the fact, for work already done (the bucket
 * may go into debt, down to minus its burst, which later requests wait out).
 */
export type Spend = 'take' | 'charge'

export interface TokenBuckets {
  take(key: string, policy: BucketPolicy, cost?: number, spend?: Spend): Promise<TakeResult>
  close(): Promise<void>
}

const spendTokens = (tokens: number, cost: number, spend: Spend, burst: number): { left: number; allowed: boolean } =>
  spend === 'charge'
    ? { left: Math.max(-burst, tokens - cost), allowed: true }
    : tokens >= cost
      ? { left: tokens - cost, allowed: true }
      : { left: tokens, allowed: false }

function result(tokens: number, allowed: boolean, policy: BucketPolicy, cost: number): TakeResult {
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
      // Re-inserted at the end: the Map stays ordered by last use, so the oldest can be dropped.
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

// KEYS[1] bucket; ARGV rate, burst, cost, spend ('take' | 'charge'), as spendTokens above.
// Redis's own clock, so every instance agrees on time.
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil then tokens = burst; at = now end
tokens = math.min(burst, tokens + (now - at) / 1000 * rate)
local cost = tonumber(ARGV[3])
local allowed = 0
if ARGV[4] == 'charge' then tokens = math.max(-burst, tokens - cost); allowed = 1
elseif tokens >= cost then tokens = tokens - cost; allowed = 1 end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'a', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return { allowed, tostring(tokens) }
`

/** Shared across instances. A Redis failure is thrown; the caller decides to fail open. */
export function redisBuckets(redis: Redis, prefix = 'contacts-api:rl:'): TokenBuckets {
  redis.defineCommand('takeToken', { numberOfKeys: 1, lua: TAKE_SCRIPT })
  const take = redis as unknown as {
    takeToken(key: string, rate: number, burst: number, cost: number, spend: Spend): Promise<[number, string]>
  }
  return {
    async take(key, policy, cost = 1, spend = 'take') {
      const [allowed, tokens] = await take.takeToken(prefix + key, policy.rate, policy.burst, cost, spend)
      return result(Number(tokens), allowed === 1, policy, cost)
    },
    async close() {},
  }
}
