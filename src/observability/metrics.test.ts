// GET /metrics: Prometheus text by route pattern and status, with the rate limiter's rejections,
// and nothing that names an account or a resource.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { expectProblem } from '../../test/helpers.js'

describe.each(testDialects())('metrics on %s', (dialect) => {
  let t: TestHarness
  beforeEach(async () => {
    t = await createTestHarness({
      dialect,
      // 1 a second: a loaded machine taking 200 ms per request still empties the burst of 5.
      env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '5', AUTH_FAILURES_PER_MINUTE: '3' },
    })
  })
  afterEach(() => t.close())

  it('serves Prometheus metrics by route pattern and status, with rate-limit rejections; no ids or accounts', async () => {
    // Traffic for every series asserted below: a list, an account over its burst, an IP over its failures.
    const acme = await t.createAccount('Acme')
    expect((await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).statusCode).toBe(200)
    for (let i = 0; i < 5; i++) {
      await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    }
    expectProblem(await t.inject(acme, { method: 'GET', url: '/api/v1/me' }), 429, 'rate_limited')
    const bad = { authorization: `Bearer service_live_${'Z'.repeat(32)}` }
    for (let i = 0; i < 3; i++) {
      await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: bad, remoteAddress: '198.51.100.7' })
    }
    expectProblem(
      await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: bad, remoteAddress: '198.51.100.7' }),
      429,
      'rate_limited',
    )

    const res = await t.app.inject({ method: 'GET', url: '/metrics' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('text/plain')
    expect(res.body).toMatch(/http_requests_total\{method="GET",route="\/api\/v1\/contacts",status="200"\} \d+/)
    expect(res.body).toMatch(/http_requests_total\{method="GET",route="\/api\/v1\/me",status="429"\} \d+/)
    expect(res.body).toMatch(
      /http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/api\/v1\/me"\} \d+/,
    )
    expect(res.body).toMatch(/rate_limit_rejections_total\{kind="account"\} [1-9]/)
    expect(res.body).toMatch(/rate_limit_rejections_total\{kind="failed_auth"\} [1-9]/)
    expect(res.body).not.toMatch(/acct_|con_|key_/)
  })

  it('is not public: only a direct local scrape is answered; anyone else gets a 404', async () => {
    const scrape = (options: { remoteAddress?: string; headers?: Record<string, string> }) =>
      t.app.inject({ method: 'GET', url: '/metrics', ...options })
    expect((await scrape({})).statusCode).toBe(200)
    expect((await scrape({ remoteAddress: '::1' })).statusCode).toBe(200)
    const refusals: Array<{ remoteAddress?: string; headers?: Record<string, string> }> = [
      { remoteAddress: '198.51.100.7' },
      { remoteAddress: '10.0.0.5' },
      // Through a reverse proxy on the same host: the proxy's forwarding header gives it away.
      { headers: { 'x-forwarded-for': '198.51.100.7' } },
      { headers: { forwarded: 'for=198.51.100.7' } },
    ]
    for (const refused of refusals) {
      const res = await scrape(refused)
      expectProblem(res, 404, 'not_found')
      expect(res.body).not.toContain('http_requests_total')
    }
  })
})

describe('metrics with METRICS_TOKEN', () => {
  let t: TestHarness
  const token = 'metrics-token-0123456789'
  beforeEach(async () => {
    t = await createTestHarness({ dialect: 'sqlite', env: { METRICS_TOKEN: token } })
  })
  afterEach(() => t.close())

  it('answers a scrape with the bearer token, from anywhere, and nothing else, even locally', async () => {
    const scrape = (headers: Record<string, string>, remoteAddress = '198.51.100.7') =>
      t.app.inject({ method: 'GET', url: '/metrics', headers, remoteAddress })
    expect((await scrape({ authorization: `Bearer ${token}` })).statusCode).toBe(200)
    const wrong: Array<Record<string, string>> = [{}, { authorization: `Bearer ${token}x` }, { authorization: token }]
    for (const headers of wrong) {
      expectProblem(await scrape(headers), 404, 'not_found')
      expectProblem(await scrape(headers, '127.0.0.1'), 404, 'not_found')
    }
  })
})
