// The token bucket's spending rules, the same in memory and in Redis's script: a cost taken only
// when the bucket holds it, a charge after the fact that may leave the bucket in debt (down to
// minus its burst), and refills from there.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { type BucketPolicy, memoryBuckets, redisBuckets, type TokenBuckets } from './token-bucket.js'

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
afterAll(() => redis.quit())

// Slow enough that no token comes back while a test runs (Redis keeps its own clock).
const policy: BucketPolicy = { rate: 0.01, burst: 5 }

const stores: Array<[string, () => TokenBuckets]> = [
  ['memory', () => memoryBuckets(() => 1_000_000)],
  ['redis', () => redisBuckets(redis, `test:${randomBytes(6).toString('hex')}:`)],
]

describe.each(stores)('token buckets in %s', (_name, make) => {
  it('takes a cost only when the bucket holds it, and a refusal spends nothing', async () => {
    const buckets = make()
    expect(await buckets.take('a', policy, 3)).toMatchObject({ allowed: true, remaining: 2 })
    const refused = await buckets.take('a', policy, 3)
    expect(refused).toMatchObject({ allowed: false, remaining: 2, retryAfter: 100 })
    expect(await buckets.take('a', policy, 2)).toMatchObject({ allowed: true, remaining: 0 })
    expect(await buckets.take('a', policy)).toMatchObject({ allowed: false, remaining: 0 })
  })

  it('charges after the fact into debt, no deeper than minus the burst, which later requests wait out', async () => {
    const buckets = make()
    expect(await buckets.take('b', policy)).toMatchObject({ allowed: true, remaining: 4 })
    expect(await buckets.take('b', policy, 100, 'charge')).toMatchObject({ allowed: true, remaining: 0 })
    // Debt of 5 (the floor), so one token is (1 + 5) / 0.01 = 600 s away.
    expect(await buckets.take('b', policy)).toMatchObject({ allowed: false, retryAfter: 600, reset: 1000 })
    // Other keys are untouched.
    expect(await buckets.take('c', policy)).toMatchObject({ allowed: true, remaining: 4 })
  })
})

describe('token buckets in memory refill', () => {
  it('refills from debt at the policy rate', async () => {
    let now = 0
    const buckets = memoryBuckets(() => now)
    const fast: BucketPolicy = { rate: 10, burst: 5 }
    await buckets.take('d', fast, 8, 'charge')
    expect(await buckets.take('d', fast)).toMatchObject({ allowed: false, retryAfter: 1 })
    now += 300 // -3 + 3 = 0: still short of one token
    expect(await buckets.take('d', fast)).toMatchObject({ allowed: false })
    now += 100
    expect(await buckets.take('d', fast)).toMatchObject({ allowed: true, remaining: 0 })
  })
})
