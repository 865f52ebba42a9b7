import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem } from '../../test/helpers.js'
import { manualClock } from '../lib/clock.js'

describe.each(testDialects())('API key authentication on %s', (dialect) => {
  const clock = manualClock(new Date())
  let t: TestHarness
  let acme: TestAccount
  let contactId: string
  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock })
    acme = await t.createAccount()
    contactId = (await createContact(t, acme, { email: 'auth@example.com' })).id
  })
  afterAll(() => t.close())

  const valid = () => acme.key

  // Every endpoint behind the key, so none can be left unprotected.
  const endpoints = () => [
    { method: 'GET' as const, url: '/api/v1/me' },
    { method: 'GET' as const, url: '/api/v1/contacts' },
    { method: 'POST' as const, url: '/api/v1/contacts', payload: { email: 'x@example.com' } },
    { method: 'POST' as const, url: '/api/v1/contacts/upsert', payload: { email: 'x@example.com' } },
    {
      method: 'POST' as const,
      url: '/api/v1/contacts/batch',
      payload: { operations: [{ op: 'create', contact: { email: 'y@example.com' } }] },
    },
    { method: 'GET' as const, url: `/api/v1/contacts/${contactId}` },
    { method: 'PATCH' as const, url: `/api/v1/contacts/${contactId}`, payload: { first_name: 'X' } },
    { method: 'DELETE' as const, url: `/api/v1/contacts/${contactId}` },
    { method: 'GET' as const, url: '/api/v1/events' },
    { method: 'GET' as const, url: '/api/v1/events/evt_01M00000000000000000000000' },
  ]

  const badHeaders: Array<[string, () => Record<string, string>]> = [
    ['missing header', () => ({})],
    ['another scheme', () => ({ authorization: `Basic ${Buffer.from(`${valid()}:`).toString('base64')}` })],
    ['empty value', () => ({ authorization: '' })],
    ['Bearer with nothing after it', () => ({ authorization: 'Bearer ' })],
    ['unknown key', () => ({ authorization: `Bearer service_live_${'A'.repeat(32)}` })],
    ['wrong prefix (test)', () => ({ authorization: `Bearer ${valid().replace('_live_', '_test_')}` })],
    ['wrong prefix (sk)', () => ({ authorization: `Bearer ${valid().replace('service_', 'sk_')}` })],
    ['31 characters', () => ({ authorization: `Bearer ${valid().slice(0, -1)}` })],
    ['33 characters', () => ({ authorization: `Bearer ${valid()}A` })],
    ['non-alphanumeric', () => ({ authorization: `Bearer ${valid().slice(0, -1)}-` })],
    ['Unicode look-alike', () => ({ authorization: `Bearer ${valid().slice(0, -1)}\u0430` })],
    ['two keys', () => ({ authorization: `Bearer ${valid()} ${valid()}` })],
    ['a 10 kB header', () => ({ authorization: `Bearer ${'A'.repeat(10_000)}` })],
    ['a NUL in the key', () => ({ authorization: `Bearer ${valid().slice(0, -1)}\u0000` })],
    ['a tab inside the key', () => ({ authorization: `Bearer ${valid().slice(0, 20)}\t${valid().slice(20)}` })],
  ]

  it('a malformed key is refused without a database lookup', async () => {
    const selectFrom = t.db.selectFrom
    t.db.selectFrom = (() => {
      throw new Error('a malformed key must not reach the database')
    }) as typeof selectFrom
    try {
      for (const key of ['service_live_short', `service_live_${'A'.repeat(31)}-`, `sk_live_${'A'.repeat(32)}`]) {
        expectProblem(
          await t.app.inject({ ...endpoints()[0], headers: { authorization: `Bearer ${key}` } }),
          401,
          'invalid_api_key',
        )
      }
    } finally {
      t.db.selectFrom = selectFrom
    }
  })

  it.each(badHeaders)('%s → 401 invalid_api_key, the same body on every endpoint', async (_name, headers) => {
    const bodies = new Set<string>()
    for (const endpoint of endpoints()) {
      const res = await t.app.inject({ ...endpoint, headers: headers() })
      const body = expectProblem(res, 401, 'invalid_api_key')
      expect(res.headers['www-authenticate']).toBe('Bearer realm="api"')
      // The harness turns failed-auth limiting off: no budget, so no RateLimit headers.
      expect(res.headers.ratelimit).toBeUndefined()
      const { request_id: _ignored, ...rest } = body
      bodies.add(JSON.stringify(rest))
    }
    expect(bodies.size).toBe(1)
  })

  it('revoked and expired keys get the same 401 body as an unknown key', async () => {
    const revokedKey = await t.createKey(acme)
    const expiringKey = await t.createKey(acme, { expiresAt: new Date(clock.now().getTime() + 60_000) })
    for (const key of [revokedKey, expiringKey]) {
      expect((await t.inject({ ...acme, key }, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    }
    const keyId = (
      await t.db.selectFrom('api_keys').select('id').where('name', '=', 'Extra').orderBy('id').executeTakeFirstOrThrow()
    ).id
    await t.db.updateTable('api_keys').set({ revoked_at: clock.now().toISOString() }).where('id', '=', keyId).execute()
    clock.advance(60_001) // past the expiry, and past the 1 s verification cache

    const unknown = await t.app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: { authorization: `Bearer service_live_${'B'.repeat(32)}` },
    })
    const reference = expectProblem(unknown, 401, 'invalid_api_key')
    for (const key of [revokedKey, expiringKey]) {
      for (const endpoint of endpoints()) {
        const res = await t.inject({ ...acme, key }, endpoint)
        const body = expectProblem(res, 401, 'invalid_api_key')
        expect({ ...body, request_id: '' }).toEqual({ ...reference, request_id: '' })
      }
    }
    // The account's other key is unaffected.
    expect((await t.inject(acme, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
  })

  it('a revocation is seen within 1 s even when another process revoked the key (cache TTL)', async () => {
    const key = await t.createKey(acme)
    const caller = { ...acme, key }
    expect((await t.inject(caller, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    await t.db
      .updateTable('api_keys')
      .set({ revoked_at: clock.now().toISOString() })
      .where('revoked_at', 'is', null)
      .where('name', '=', 'Extra')
      .execute()
    clock.advance(1000)
    expectProblem(await t.inject(caller, { method: 'GET', url: '/api/v1/me' }), 401, 'invalid_api_key')
  })

  it('a key whose verification is cached is refused from the millisecond it expires', async () => {
    const expiresAt = new Date(clock.now().getTime() + 500) // inside the 1 s verification cache
    const caller = { ...acme, key: await t.createKey(acme, { expiresAt }) }
    expect((await t.inject(caller, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200) // cached now
    clock.advance(499)
    expect((await t.inject(caller, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
    clock.advance(1)
    expectProblem(await t.inject(caller, { method: 'GET', url: '/api/v1/me' }), 401, 'invalid_api_key')
  })

  it("counts a key's requests per UTC day, across midnight, through the cached verification", async () => {
    const counted = await t.createAccount('Counted')
    const midnight = Date.UTC(2031, 0, 2)
    clock.set(new Date(midnight - 300))
    for (let i = 0; i < 3; i++) {
      await t.inject(counted, { method: 'GET', url: '/api/v1/me' })
    }
    clock.advance(300) // 00:00:00.000 on 2 January: the cached entry is still fresh
    for (let i = 0; i < 2; i++) {
      await t.inject(counted, { method: 'GET', url: '/api/v1/me' })
    }
    await t.deps.keyVerifier.flush()
    const rows = await t.db
      .selectFrom('api_key_usage')
      .select(['day', 'requests'])
      .where('key_id', '=', counted.keyId)
      .orderBy('day')
      .execute()
    expect(rows.map((row) => [row.day, Number(row.requests)])).toEqual([
      ['2031-01-01', 3],
      ['2031-01-02', 2],
    ])
  })

  it('on one keep-alive connection, each request is verified with the header it carries', async () => {
    const origin = await t.app.listen({ host: '127.0.0.1', port: 0 })
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const sockets = new Set<unknown>()
    const get = (key: string) =>
      new Promise<number>((resolve, reject) => {
        const req = http.get(`${origin}/api/v1/me`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          sockets.add(res.socket)
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        })
        req.on('error', reject)
      })
    try {
      const other = await t.createKey(acme)
      expect(await get(valid())).toBe(200)
      expect(await get(`service_live_${'C'.repeat(32)}`)).toBe(401)
      expect(await get(valid())).toBe(200)
      expect(await get(other)).toBe(200)
      await t.db
        .updateTable('api_keys')
        .set({ revoked_at: clock.now().toISOString() })
        .where('revoked_at', 'is', null)
        .where('name', '=', 'Extra')
        .execute()
      clock.advance(1000) // past the verification cache: the revocation is read, connection or not
      expect(await get(other)).toBe(401)
      expect(await get(valid())).toBe(200)
      expect(sockets.size).toBe(1)
    } finally {
      agent.destroy()
    }
  })

  it('accepts the scheme in any case (RFC 9110) and extra spaces after it', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer  ']) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/api/v1/me',
        headers: { authorization: `${scheme} ${valid()}` },
      })
      expect(res.statusCode, scheme).toBe(200)
    }
  })

  it('never accepts the key from the query string', async () => {
    const res = await t.app.inject({ method: 'GET', url: `/api/v1/me?api_key=${valid()}` })
    expectProblem(res, 401, 'invalid_api_key')
  })

  it('several keys of one account each work on their own', async () => {
    const second = await t.createKey(acme)
    for (const key of [valid(), second]) {
      expect((await t.inject({ ...acme, key }, { method: 'GET', url: '/api/v1/me' })).json().id).toBe(acme.id)
    }
  })

  it('records last use at most once a minute, off the request path', async () => {
    const fresh = await t.createAccount('Fresh')
    const lastUsed = async () =>
      (await t.db.selectFrom('api_keys').select('last_used_at').where('id', '=', fresh.keyId).executeTakeFirstOrThrow())
        .last_used_at
    await t.inject(fresh, { method: 'GET', url: '/api/v1/me' })
    expect(await lastUsed()).toBeNull() // not written by the request itself
    await t.deps.keyVerifier.flush()
    const first = await lastUsed()
    expect(first).toBe(clock.now().toISOString())
    clock.advance(30_000)
    await t.inject(fresh, { method: 'GET', url: '/api/v1/me' })
    await t.deps.keyVerifier.flush()
    expect(await lastUsed()).toBe(first)
    clock.advance(30_001)
    await t.inject(fresh, { method: 'GET', url: '/api/v1/me' })
    await t.deps.keyVerifier.flush()
    expect(await lastUsed()).toBe(clock.now().toISOString())
  })
})
