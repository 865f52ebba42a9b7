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

export interface TokenBuckets {
  take(key: string, policy: BucketPolicy): Promise<TakeResult>
  close(): Promise<void>
}

function result(tokens: number, allowed: boolean, policy: BucketPolicy): TakeResult {
  return {
    allowed,
    remaining: Math.max(0, Math.floor(tokens)),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / policy.rate)),
    reset: Math.ceil((policy.burst - tokens) / policy.rate),
  }
}

export function memoryBuckets(now: () => number = Date.now): TokenBuckets {
  const buckets = new Map<string, { tokens: number; at: number }>()
  return {
    async take(key, policy) {
      const t = now()
      const bucket = buckets.get(key) ?? { tokens: policy.burst, at: t }
      const tokens = Math.min(policy.burst, bucket.tokens + ((t - bucket.at) / 1000) * policy.rate)
      const allowed = tokens >= 1
      const left = allowed ? tokens - 1 : tokens
      // Re-inserted at the end: the Map stays ordered by last use, so the oldest can be dropped.
      buckets.delete(key)
      buckets.set(key, { tokens: left, at: t })
      if (buckets.size > 100_000) {
        const oldest = buckets.keys().next().value
        if (oldest !== undefined) {
          buckets.delete(oldest)
        }
      }
      return result(left, allowed, policy)
    },
    async close() {},
  }
}

// KEYS[1] bucket; ARGV rate, burst. Redis's own clock, so every instance agrees on time.
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
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'a', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return { allowed, tostring(tokens) }
`

/** Shared across instances. A Redis failure is thrown; the caller decides to fail open. */
export function redisBuckets(redis: Redis, prefix = 'contacts-api:rl:'): TokenBuckets {
  redis.defineCommand('takeToken', { numberOfKeys: 1, lua: TAKE_SCRIPT })
  const take = redis as unknown as { takeToken(key: string, rate: number, burst: number): Promise<[number, string]> }
  return {
    async take(key, policy) {
      const [allowed, tokens] = await take.takeToken(prefix + key, policy.rate, policy.burst)
      return result(Number(tokens), allowed === 1, policy)
    },
    async close() {},
  }
}
