// The rate-limit check's client-side CPU, alone: `rounds` × `n` takes on one account's bucket in
// Redis, one round trip each (redisBuckets) against leases of 10 (leasedBuckets), alternated, with
// CONC takes in flight (1: one at a time, as a paced load's requests each in its own wake-up).
// process.cpuUsage around each batch; a bucket too large to refuse; a key prefix of its own.
//
//   CONC=1 node --import tsx bench/rate-limit-check.ts [redis-url]
import { Redis } from 'ioredis'
import { redisBucketStore, redisBuckets, type TokenBuckets } from '../src/rate-limit/token-bucket.js'
import { leasedBuckets } from '../src/rate-limit/token-lease.js'

const concurrency = Number(process.env.CONC ?? 16)
const n = 20_000
const rounds = 5
const redis = new Redis(process.argv[2] ?? 'redis://127.0.0.1:6379')
const prefix = `bench:rate-limit-check:${process.pid}:`
const policy = { rate: 1_000_000, burst: 1_000_000 }

async function cpuPerTake(buckets: TokenBuckets): Promise<number> {
  const before = process.cpuUsage()
  let started = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started++ < n) {
        await buckets.take('acct:bench', policy)
      }
    }),
  )
  const spent = process.cpuUsage(before)
  return (spent.user + spent.system) / n
}

const exact = redisBuckets(redis, prefix)
const leased = leasedBuckets(redisBucketStore(redis, `${prefix}leased:`), { leaseMax: 10 })
await cpuPerTake(exact) // warm-up
await cpuPerTake(leased)
const figures: Record<string, string[]> = { 'one round trip per take': [], 'leases of 10': [] }
for (let r = 0; r < rounds; r++) {
  figures['one round trip per take']?.push((await cpuPerTake(exact)).toFixed(1))
  figures['leases of 10']?.push((await cpuPerTake(leased)).toFixed(1))
}
for (const [name, values] of Object.entries(figures)) {
  console.log(`${name}: ${values.join(', ')} µs of CPU per take (${concurrency} in flight)`)
}
await redis.quit()
