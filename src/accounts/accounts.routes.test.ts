import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'

describe.each(testDialects())('GET /api/v1/me on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '100', RATE_LIMIT_BURST: '200' } })
  })
  afterAll(() => t.close())

  it('returns the account of the key, its key and limits', async () => {
    const acme = await t.createAccount('Acme')
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.headers['request-id']).toMatch(/^req_[0-9A-Z]{26}$/)
    const body = res.json()
    expect(body).toEqual({
      object: 'account',
      id: acme.id,
      name: 'Acme',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      livemode: true,
      api_key: {
        id: acme.keyId,
        name: 'Default',
        scopes: ['read', 'write'],
        created_at: body.created_at,
        expires_at: null,
      },
      limits: {
        requests_per_second: 100,
        burst: 200,
        page_size_max: 100,
        custom_fields_max: 50,
        contacts_max: 1_000_000,
      },
    })
    expect(res.body).not.toContain(acme.key)
    expect(res.body).not.toMatch(/hash/)
  })
})
