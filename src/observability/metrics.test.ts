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
      env: { RATE_LIMIT_PER_SECOND: '10', RATE_LIMIT_BURST: '5', AUTH_FAILURES_PER_MINUTE: '3' },
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
})
