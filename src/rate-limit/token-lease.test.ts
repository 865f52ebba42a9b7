// Leased tokens (token-lease.ts) on a real Redis: two instances sharing one bucket never spend more
// than it holds, an account near its limit is decided by Redis on every request exactly as without
// leases (same refusals, same RateLimit figures), concurrent requests wait for one round trip, and
// unspent tokens go back.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { createTestHarness } from '../../test/harness.js'
import { expectProblem } from '../../test/helpers.js'
import {
  type BucketPolicy,
  type RedisBucketStore,
  redisBucketStore,
  redisBuckets,
  type TakeResult,
  type TokenBuckets,
} from './token-bucket.js'
import { LEASE_TTL_MS, leasedBuckets } from './token-lease.js'

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
afterAll(() => redis.quit())

// A prefix of this file's own, so nothing else shares these buckets.
const prefix = `test:lease:${randomBytes(6).toString('hex')}:`
// Slow enough that no token comes back while a test runs (Redis keeps its own clock).
const slow = (burst: number): BucketPolicy => ({ rate: 0.01, burst })

/** The store, counting its round trips (the real script runs). */
function counted(): { store: RedisBucketStore; trips: () => number } {
  const real = redisBucketStore(redis, prefix)
  let trips = 0
  return {
    store: {
      take(...args) {
        trips++
        return real.take(...args)
      },
    },
    trips: () => trips,
  }
}

const view = (r: TakeResult) => ({
  allowed: r.allowed,
  remaining: r.remaining,
  retryAfter: r.retryAfter,
  reset: r.reset,
})

describe('leased tokens on Redis', () => {
  it('two instances sharing a bucket serve exactly its tokens, in a fraction of the round trips', async () => {
    const a = counted()
    const b = counted()
    const instances = [leasedBuckets(a.store, { leaseMax: 10 }), leasedBuckets(b.store, { leaseMax: 10 })]
    const policy = slow(200)
    let served = 0
    for (let i = 0; i < 300; i++) {
      const taken = await (instances[i % 2] as TokenBuckets).take('shared', policy)
      served += taken.allowed ? 1 : 0
    }
    expect(served).toBe(200)
    // 2 × 10 leases down to 20 tokens (180 / 10 = 18 trips), then one trip per request, then refusals.
    expect(a.trips() + b.trips()).toBeLessThan(150)
    const exact = redisBuckets(redis, prefix)
    let servedExact = 0
    for (let i = 0; i < 300; i++) {
      servedExact += (await exact.take('shared-exact', policy)).allowed ? 1 : 0
    }
    expect(servedExact).toBe(served)
  })

  it('gives the same answers as one round trip per request, and asks Redis every time near the limit', async () => {
    const leased = counted()
    const buckets = leasedBuckets(leased.store, { leaseMax: 10 })
    const exact = redisBuckets(redis, prefix)
    const policy = slow(40)
    const costs = [1, 1, 3, 1, 1, 1, 2, ...new Array<number>(30).fill(1), 5, 1, 1]
    const withLease: ReturnType<typeof view>[] = []
    const without: ReturnType<typeof view>[] = []
    // Once 20 tokens or fewer were left, no lease is taken; the last one (2 tokens, taken at 20 or
    // 21) may still serve one more request: below 18, every request is a round trip.
    const tripsBelow18: number[] = []
    let previous = policy.burst
    for (const cost of costs) {
      const before = leased.trips()
      const taken = await buckets.take('parity', policy, cost)
      withLease.push(view(taken))
      without.push(view(await exact.take('parity-exact', policy, cost)))
      if (previous < 18) {
        tripsBelow18.push(leased.trips() - before)
      }
      previous = taken.remaining
    }
    expect(withLease).toEqual(without)
    expect(without.filter((r) => !r.allowed).length).toBeGreaterThan(2) // the refusals are compared too
    expect(without.at(-1)).toMatchObject({ allowed: false, remaining: 0, retryAfter: 100 })
    expect(tripsBelow18).toEqual(new Array(tripsBelow18.length).fill(1))
    expect(tripsBelow18.length).toBeGreaterThan(15)
    expect(leased.trips()).toBeLessThan(costs.length)
  })

  it('concurrent requests of one instance wait for one round trip: 50 at once make 5 leases of 10', async () => {
    const leased = counted()
    const buckets = leasedBuckets(leased.store, { leaseMax: 10 })
    const results = await Promise.all(Array.from({ length: 50 }, () => buckets.take('burst', slow(1000))))
    expect(leased.trips()).toBe(5)
    expect(results.every((r) => r.allowed)).toBe(true)
    // Each response reports its own place in the countdown, as one bucket would.
    expect(results.map((r) => r.remaining).sort((x, y) => y - x)).toEqual(Array.from({ length: 50 }, (_, i) => 999 - i))
  })

  it('gives unspent tokens back on the next round trip once the lease is past its lifetime', async () => {
    let now = 0
    const leased = counted()
    const buckets = leasedBuckets(leased.store, { leaseMax: 10, now: () => now })
    const exact = redisBuckets(redis, prefix)
    const policy = slow(1000)
    expect(await buckets.take('ttl', policy)).toMatchObject({ allowed: true, remaining: 999 })
    expect((await exact.take('ttl', policy, 0)).remaining).toBe(990) // 10 leased, 9 of them unspent
    now += LEASE_TTL_MS - 1
    expect(await buckets.take('ttl', policy)).toMatchObject({ remaining: 998 })
    expect(leased.trips()).toBe(1)
    now += 1
    // Expired: its 8 go back, and a new lease of 10 is taken in the same round trip.
    expect(await buckets.take('ttl', policy)).toMatchObject({ allowed: true, remaining: 997 })
    expect(leased.trips()).toBe(2)
    expect((await exact.take('ttl', policy, 0)).remaining).toBe(988)
  })

  it('charges after the fact from the lease first, then into the bucket’s debt like one bucket', async () => {
    const leased = counted()
    const buckets = leasedBuckets(leased.store, { leaseMax: 10 })
    const exact = redisBuckets(redis, prefix)
    const policy = slow(50)
    const steps: Array<[number, 'take' | 'charge']> = [
      [1, 'take'],
      [3, 'charge'],
      [100, 'charge'],
      [1, 'take'],
    ]
    const withLease = []
    const without = []
    for (const [cost, spend] of steps) {
      withLease.push(view(await buckets.take('debt', policy, cost, spend)))
      without.push(view(await exact.take('debt-exact', policy, cost, spend)))
    }
    expect(withLease).toEqual(without)
    expect(without[3]).toMatchObject({ allowed: false, retryAfter: 5100 }) // (1 + 50 of debt) / 0.01
    expect(leased.trips()).toBe(3) // the charge of 3 came out of the lease
  })

  it('with a lease of 1 every request asks Redis', async () => {
    const leased = counted()
    const buckets = leasedBuckets(leased.store, { leaseMax: 1 })
    for (let i = 0; i < 5; i++) {
      await buckets.take('no-lease', slow(1000))
    }
    expect(leased.trips()).toBe(5)
  })
})

describe('leased tokens over HTTP (REDIS_URL, RATE_LIMIT_LEASE 10)', () => {
  it('spends the burst with RateLimit counting down by one per request, then 429 with Retry-After as without leases', async () => {
    const t = await createTestHarness({
      dialect: 'sqlite',
      env: { REDIS_URL: redisUrl, RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '40', RATE_LIMIT_LEASE: '10' },
    })
    try {
      await t.deps.start()
      const acme = await t.createAccount()
      const remaining: number[] = []
      let limited: Awaited<ReturnType<typeof t.inject>> | undefined
      for (let i = 0; i < 50 && !limited; i++) {
        const res = await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
        if (res.statusCode === 429) {
          limited = res
        } else {
          expect(res.headers['ratelimit-policy']).toBe('"account";q=40;w=40')
          remaining.push(Number(/r=(\d+)/.exec(String(res.headers.ratelimit))?.[1]))
        }
      }
      // 40, and one more per second the requests took (1 a second comes back).
      expect(remaining.length).toBeGreaterThanOrEqual(40)
      expect(remaining.length).toBeLessThanOrEqual(42)
      expect(remaining[0]).toBe(39)
      expect(remaining.at(-1)).toBe(0)
      // Down by one per request, give or take a token refilled meanwhile.
      for (let i = 1; i < remaining.length; i++) {
        expect((remaining[i - 1] as number) - (remaining[i] as number)).toBeGreaterThanOrEqual(0)
        expect((remaining[i - 1] as number) - (remaining[i] as number)).toBeLessThanOrEqual(1)
      }
      expectProblem(limited as NonNullable<typeof limited>, 429, 'rate_limited')
      expect(limited?.headers['retry-after']).toBe('1')
      expect(limited?.headers.ratelimit).toBe('"account";r=0;t=1')
    } finally {
      await t.close()
    }
  })
})
