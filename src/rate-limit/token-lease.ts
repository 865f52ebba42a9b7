// Leased tokens from the shared (Redis) buckets: one round trip takes up to `leaseMax` tokens, and
// this instance serves the next requests of that key from the lease without asking Redis.
//
// What it buys (bench/two-instances.ts, docs/scale-out.md): the Redis check cost ~45 µs of API CPU
// per request (one EVALSHA through ioredis: the command, its promise, two socket system calls), half
// of a cached GET /me; with leases of 10 it is paid once per 10 requests of a busy account.
//
// What it costs, and the bounds (docs/rate-limits.md, "Several instances"):
// - Leased tokens are taken out of the bucket when leased, so they are never spent twice; but the
//   bucket refills to its burst while leases are outstanding, so over any interval of T seconds an
//   account may be served up to N × (leaseMax − 1) requests more than burst + rate × T, with N
//   instances (each holds at most one lease per key, and at most leaseMax − 1 tokens of it unspent).
// - A lease is at most a tenth of what the bucket held (LEASE_SHARE): below 20 tokens every grant
//   is the request's own cost, so every request of an account near or at its limit is decided by
//   Redis exactly as without leases (the same refusals, the same Retry-After).
// - Unspent tokens go back to the bucket with this instance's next round trip for that key, and a
//   lease is not used past LEASE_TTL_MS, so tokens stranded on a quiet instance are back (and
//   other instances refused for want of them) within a second at most.
// - RateLimit's `r` is what the bucket held at this instance's last round trip (≤ LEASE_TTL_MS ago),
//   plus its refill since, plus the lease left: other instances' spending since then is not in it.
//   Near the limit (below 20 tokens) there is no lease and `r` is Redis's own figure.
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
