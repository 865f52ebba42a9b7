// Leased tokens from the shared (Redis) buckets: one round trip takes up to `leaseMax` tokens, and
// this instance serves the key's next requests from the lease, sparing a Redis round trip each.
// Near the limit there is no lease, so Redis decides as without leases. What leasing lets through,
// and its bounds: docs/rate-limits.md, "Several instances: Redis"; its cost: docs/scale-out.md.
import {
  type BucketPolicy,
  LEASE_SHARE,
  type RedisBucketStore,
  result,
  type Spend,
  type TakeResult,
  type TokenBuckets,
} from './token-bucket.js'

/** A lease is used for one second at most: bounds stale `RateLimit` figures and stranded tokens. */
export const LEASE_TTL_MS = 1000
/** Keys with a lease kept at most (the least recently leased are dropped, their tokens unreturned). */
const MAX_LEASES = 100_000

interface Lease {
  /** Leased tokens not yet spent. */
  tokens: number
  /** The bucket's tokens at the last round trip, and when (local ms). */
  seen: number
  seenAt: number
  /** Local ms after which the lease is not used (counted from when the request was sent). */
  expires: number
  /** The round trip for a lease under way: other requests for the key wait for it. */
  pending: Promise<unknown> | undefined
}

export interface LeaseOptions {
  /** Tokens one round trip may take at most; 1 turns leasing off. */
  leaseMax: number
  /** Local monotonic ms (for tests); Redis keeps its own clock for the bucket itself. */
  now?: () => number
}

export function leasedBuckets(store: RedisBucketStore, options: LeaseOptions): TokenBuckets {
  const now = options.now ?? (() => performance.now())
  const leases = new Map<string, Lease>()

  // min(burst, bucket then + refill since + lease left): the single bucket's figure as this instance knows it.
  const estimate = (lease: Lease, policy: BucketPolicy, t: number): number =>
    Math.min(policy.burst, lease.seen + ((t - lease.seenAt) / 1000) * policy.rate + lease.tokens)

  const roundTrip = async (
    key: string,
    lease: Lease,
    policy: BucketPolicy,
    cost: number,
    spend: Spend,
    leasing: boolean,
  ): Promise<TakeResult> => {
    const sent = now()
    // Whatever is left of the lease goes back now (expired, or too small for this cost).
    const returned = Math.max(0, lease.tokens)
    lease.tokens = 0
    const grant = await store.take(key, policy, cost, spend, returned, leasing ? options.leaseMax : 0)
    const t = now()
    lease.seen = grant.tokens
    lease.seenAt = t
    if (grant.allowed && grant.granted > cost) {
      lease.tokens += grant.granted - cost
      lease.expires = sent + LEASE_TTL_MS
    }
    return result(estimate(lease, policy, t), grant.allowed, policy, cost)
  }

  return {
    async take(key, policy, cost = 1, spend = 'take') {
      for (;;) {
        const t = now()
        let lease = leases.get(key)
        if (lease && t < lease.expires && lease.tokens >= cost) {
          lease.tokens -= cost
          return result(estimate(lease, policy, t), true, policy, cost)
        }
        if (lease?.pending) {
          await lease.pending.catch(() => {})
          continue
        }
        if (!lease) {
          lease = { tokens: 0, seen: policy.burst, seenAt: t, expires: 0, pending: undefined }
        }
        // Re-inserted at the end: the Map stays ordered by last round trip, so the oldest can go.
        leases.delete(key)
        leases.set(key, lease)
        if (leases.size > MAX_LEASES) {
          const oldest = leases.keys().next().value
          if (oldest !== undefined) {
            leases.delete(oldest)
          }
        }
        // A lease only when the bucket held enough for one (2 × LEASE_SHARE) at the last look and
        // this is a take. Then one round trip at a time per key, so an instance never holds more
        // than one lease; near the limit every request goes to Redis at once, as without leases.
        const leasing = spend === 'take' && options.leaseMax > 1 && estimate(lease, policy, t) >= 2 * LEASE_SHARE
        if (!leasing) {
          return roundTrip(key, lease, policy, cost, spend, false)
        }
        const trip = roundTrip(key, lease, policy, cost, spend, true)
        const current = lease
        current.pending = trip
        try {
          return await trip
        } finally {
          current.pending = undefined
        }
      }
    },
    async close() {},
  }
}
