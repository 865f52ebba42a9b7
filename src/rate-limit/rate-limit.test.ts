// Rate limits over HTTP: the token bucket per account, failed authentications per client address,
// and a scraper resuming after its 429. Each test starts from a fresh database and full budgets.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { expectProblem } from '../../test/helpers.js'
import { liveTenant } from '../accounts/tenant.js'
import { manualClock } from '../lib/clock.js'

describe.each(testDialects())('rate limits on %s', (dialect) => {
  let clock: ReturnType<typeof manualClock>
  let t: TestHarness
  beforeEach(async () => {
    clock = manualClock(new Date())
    t = await createTestHarness({
      dialect,
      clock,
      env: { RATE_LIMIT_PER_SECOND: '10', RATE_LIMIT_BURST: '5', AUTH_FAILURES_PER_MINUTE: '3' },
    })
  })
  afterEach(() => t.close())

  it('spends a token bucket per account: burst, then 429 with Retry-After and RateLimit headers, then refills', async () => {
    const acme = await t.createAccount('Acme')
    const other = await t.createAccount('Other')
    const remaining: string[] = []
    for (let i = 0; i < 5; i++) {
      const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
      expect(res.statusCode).toBe(200)
      expect(res.headers['ratelimit-policy']).toBe('"account";q=5;w=1')
      remaining.push(String(res.headers.ratelimit))
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0].map((r) => `"account";r=${r};t=${r === 4 ? 1 : 1}`))
    const limited = await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    const body = expectProblem(limited, 429, 'rate_limited')
    expect(limited.headers['retry-after']).toBe('1')
    expect(limited.headers.ratelimit).toBe('"account";r=0;t=1')
    expect(body.detail).toContain('10 requests per second')
    // Another account has its own budget.
    expect((await t.inject(other, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    clock.advance(100) // one token back at 10/s
    expect((await t.inject(acme, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    expectProblem(await t.inject(acme, { method: 'GET', url: '/api/v1/me' }), 429, 'rate_limited')
  })

  it('limits failed authentications per IP: then 429, while a valid key from the same IP still works', async () => {
    const acme = await t.createAccount('Valid')
    const bad = { authorization: `Bearer service_live_${'Z'.repeat(32)}` }
    const from = (remoteAddress: string) => ({ method: 'GET' as const, url: '/api/v1/me', headers: bad, remoteAddress })
    for (let i = 0; i < 3; i++) {
      const failed = await t.app.inject(from('198.51.100.7'))
      expectProblem(failed, 401, 'invalid_api_key')
      // The 401 reports the IP's failed-auth budget (3 a minute, one back every 20 s).
      expect(failed.headers['ratelimit-policy']).toBe('"failed_auth";q=3;w=60')
      expect(failed.headers.ratelimit).toBe(`"failed_auth";r=${2 - i};t=${20 * (i + 1)}`)
    }
    const limited = await t.app.inject(from('198.51.100.7'))
    expectProblem(limited, 429, 'rate_limited')
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0)
    expect(limited.headers['ratelimit-policy']).toBe('"failed_auth";q=3;w=60')
    expect(limited.headers.ratelimit).toBe(`"failed_auth";r=0;t=${limited.headers['retry-after']}`)
    const elsewhere = await t.app.inject(from('198.51.100.8'))
    expectProblem(elsewhere, 401, 'invalid_api_key')
    expect(elsewhere.headers.ratelimit).toBe('"failed_auth";r=2;t=20')
    const valid = await t.app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: { authorization: `Bearer ${acme.key}` },
      remoteAddress: '198.51.100.7',
    })
    expect(valid.statusCode).toBe(200)
    // An authenticated request reports its account's budget, not the IP's failures.
    expect(valid.headers['ratelimit-policy']).toBe('"account";q=5;w=1')
  })

  it('a scraper walking every page with one key hits 429 with Retry-After, and resumes with the same cursor', async () => {
    const scraper = await t.createAccount('Scraper')
    // Seeded through the contact service, so the seeding spends none of the budget.
    for (let i = 0; i < 8; i++) {
      await t.deps.contacts.create(liveTenant(scraper.id), { first_name: `Row ${i}` })
    }
    const statuses: number[] = []
    let after: string | undefined
    let limited: Awaited<ReturnType<typeof t.inject>> | undefined
    for (let page = 0; page < 8 && !limited; page++) {
      const res = await t.inject(scraper, {
        method: 'GET',
        url: `/api/v1/contacts?limit=1${after ? `&after=${after}` : ''}`,
      })
      statuses.push(res.statusCode)
      if (res.statusCode === 429) {
        limited = res
      } else {
        after = res.json().next_cursor
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0)
    clock.advance(1000)
    const resumed = await t.inject(scraper, { method: 'GET', url: `/api/v1/contacts?limit=1&after=${after}` })
    expect(resumed.statusCode).toBe(200)
    expect(resumed.json().contacts[0].first_name).toBe('Row 5')
  })

  it('counts failed authentications by the client address, from X-Forwarded-For only with TRUST_PROXY', async () => {
    const bad = { authorization: `Bearer service_live_${'Y'.repeat(32)}` }
    const viaProxy = (forwardedFor: string) => ({
      method: 'GET' as const,
      url: '/api/v1/me',
      headers: { ...bad, 'x-forwarded-for': forwardedFor },
      remoteAddress: '10.0.0.2',
    })
    // Without TRUST_PROXY the header is ignored: every client behind the proxy shares one budget.
    for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
      expectProblem(await t.app.inject(viaProxy(client)), 401, 'invalid_api_key')
    }
    expectProblem(await t.app.inject(viaProxy('203.0.113.4')), 429, 'rate_limited')

    const proxied = await createTestHarness({
      dialect,
      clock,
      env: { AUTH_FAILURES_PER_MINUTE: '3', TRUST_PROXY: '1' },
    })
    try {
      // Behind one trusted proxy each client has its own budget, and the proxy itself spends none.
      for (let i = 0; i < 3; i++) {
        expectProblem(await proxied.app.inject(viaProxy('203.0.113.1')), 401, 'invalid_api_key')
      }
      expectProblem(await proxied.app.inject(viaProxy('203.0.113.1')), 429, 'rate_limited')
      expectProblem(await proxied.app.inject(viaProxy('203.0.113.2')), 401, 'invalid_api_key')
      // A client rotating through addresses of one IPv6 /64 gets one budget.
      for (const suffix of ['1', '2', '3']) {
        expectProblem(await proxied.app.inject(viaProxy(`2001:db8:5:6::${suffix}`)), 401, 'invalid_api_key')
      }
      expectProblem(await proxied.app.inject(viaProxy('2001:db8:5:6::ffff')), 429, 'rate_limited')
      expectProblem(await proxied.app.inject(viaProxy('2001:db8:5:7::1')), 401, 'invalid_api_key')
    } finally {
      await proxied.close()
    }
  })
})
