// Redis going away while the service runs (docs/api-decisions.md): rate limiting fails open, so a
// Redis outage never becomes an API outage, and each failed check is counted in /metrics. Uses its
// own throwaway redis-server, so the shared one stays up for the other suites.
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'

const REDIS_SERVER = 'redis-server'

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  server.close()
  return typeof address === 'object' && address ? address.port : 0
}

describe('rate limits when Redis goes away', () => {
  let redis: ChildProcess
  let t: TestHarness
  let acme: TestAccount

  beforeAll(async () => {
    const port = await freePort()
    redis = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('redis-server did not start in 10 s')), 10_000)
      redis.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('Ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      })
      redis.on('error', reject)
    })
    t = await createTestHarness({
      dialect: 'sqlite',
      env: { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '2' },
    })
    await t.deps.start()
    acme = await t.createAccount()
  })
  afterAll(async () => {
    await t?.close()
    redis?.kill('SIGKILL')
  })

  const me = () => t.inject(acme, { method: 'GET', url: '/api/v1/me' })
  const storeErrors = async () => {
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' })
    return Number(/^rate_limit_store_errors_total (\d+)/m.exec(metrics.body)?.[1] ?? Number.NaN)
  }

  it('enforces the budget through Redis, then keeps serving when Redis dies, counting each failed check', async () => {
    expect([(await me()).statusCode, (await me()).statusCode, (await me()).statusCode]).toEqual([200, 200, 429])
    expect(await storeErrors()).toBe(0)

    redis.kill('SIGKILL')
    await once(redis, 'exit')
    const statuses = []
    for (let i = 0; i < 5; i++) {
      statuses.push((await me()).statusCode)
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200])
    expect(await storeErrors()).toBeGreaterThanOrEqual(5)
  })
})
