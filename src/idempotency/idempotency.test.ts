// Idempotency-Key on POST: replay, reuse, in-flight and abandoned keys, races, expiry. Each test starts
// from a fresh database and clock, so none depends on what another wrote or how far it moved time.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { expectProblem, snapshotAccount } from '../../test/helpers.js'
import { manualClock } from '../lib/clock.js'
import { purgeExpiredIdempotencyKeys } from './idempotency.js'

describe.each(testDialects())('Idempotency-Key on %s', (dialect) => {
  let clock: ReturnType<typeof manualClock>
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    clock = manualClock(new Date())
    t = await createTestHarness({ dialect, clock })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const post = (key: string | undefined, payload: object, url = '/api/v1/contacts', account = acme) =>
    t.inject(account, { method: 'POST', url, payload, headers: key === undefined ? {} : { 'idempotency-key': key } })

  it('replays the first response for the same key and body, with Idempotent-Replayed and Location', async () => {
    const first = await post('create-ada-1', { email: 'ada@example.com' })
    expect(first.statusCode).toBe(201)
    expect(first.headers['idempotent-replayed']).toBeUndefined()
    const before = await snapshotAccount(t, acme)
    const again = await post('create-ada-1', { email: 'ada@example.com' })
    expect(again.statusCode).toBe(201)
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(again.headers.location).toBe(first.headers.location)
    expect(again.body).toBe(first.body)
    expect(again.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(await snapshotAccount(t, acme)).toEqual(before)
  })

  it('replays an error response too (a 409 stays a 409)', async () => {
    expect((await post(undefined, { email: 'ada@example.com' })).statusCode).toBe(201)
    const first = await post('dup-1', { email: 'ada@example.com' })
    expectProblem(first, 409, 'contact_exists')
    const again = await post('dup-1', { email: 'ada@example.com' })
    // The same problem, naming the request it answers (body and Request-Id header agree).
    const replayed = expectProblem(again, 409, 'contact_exists')
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(replayed.request_id).not.toBe(first.json().request_id)
    expect({ ...replayed, request_id: null }).toEqual({ ...first.json(), request_id: null })
  })

  it('the same key with another body → 422 idempotency_key_reused, nothing written', async () => {
    await post('reuse-1', { email: 'grace@example.com' })
    const before = await snapshotAccount(t, acme)
    expectProblem(await post('reuse-1', { email: 'other@example.com' }), 422, 'idempotency_key_reused')
    expectProblem(
      await post('reuse-1', { email: 'grace@example.com' }, '/api/v1/contacts/upsert'),
      422,
      'idempotency_key_reused',
    )
    expect(await snapshotAccount(t, acme)).toEqual(before)
  })

  it('a duplicate while the first is in flight → 409 idempotency_key_in_use; an abandoned one is taken over', async () => {
    const body = { email: 'inflight@example.com' }
    // The first request's row, as it stands while that request runs.
    const { sha256Hex } = await import('../lib/crypto.js')
    await t.db
      .insertInto('idempotency_keys')
      .values({
        account_id: acme.id,
        key: 'inflight-1',
        request_hash: sha256Hex(JSON.stringify(['POST', '/api/v1/contacts', body])),
        status: null,
        body: null,
        location: null,
        created_at: clock.now().toISOString(),
        expires_at: new Date(clock.now().getTime() + 86_400_000).toISOString(),
      })
      .execute()
    const busy = await post('inflight-1', body)
    expectProblem(busy, 409, 'idempotency_key_in_use')
    expect(busy.headers['retry-after']).toBe('1')
    clock.advance(61_000) // its process died: the key is free again
    expect((await post('inflight-1', body)).statusCode).toBe(201)
  })

  it('concurrent duplicates create one contact', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => post('race-1', { email: 'race@example.com' })))
    const statuses = results.map((r) => r.statusCode)
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1)
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true)
    const list = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?email=race@example.com' })
    expect(list.json().contacts).toHaveLength(1)
  })

  it('keys are per account, and expire after 24 h (then purged)', async () => {
    const other = await t.createAccount('Other')
    expect((await post('shared-key', { email: 'mine@example.com' })).statusCode).toBe(201)
    const theirs = await post('shared-key', { email: 'theirs@example.com' }, '/api/v1/contacts', other)
    expect(theirs.statusCode).toBe(201)
    expect(theirs.headers['idempotent-replayed']).toBeUndefined()

    clock.advance(24 * 3600_000)
    expect(await purgeExpiredIdempotencyKeys(t.db, clock.now())).toBeGreaterThanOrEqual(2)
    const after = await post('shared-key', { email: 'mine@example.com' })
    expectProblem(after, 409, 'contact_exists') // run again, not replayed
    expect(after.headers['idempotent-replayed']).toBeUndefined()
  })

  it('refuses a malformed key with 400', async () => {
    for (const key of ['', 'x'.repeat(256), 'has space', 'tab\tkey']) {
      const res = await post(key, { email: 'bad-key@example.com' })
      expect(expectProblem(res, 400, 'invalid_parameter').errors[0].field).toBe('Idempotency-Key')
    }
  })

  it('is ignored on other methods and without the header', async () => {
    expect((await post(undefined, { first_name: 'No key' })).statusCode).toBe(201)
    const made = await post(undefined, { first_name: 'No key' })
    expect(made.statusCode).toBe(201)
    const id = (made.json() as { id: string }).id
    // Other methods: neither checked (a malformed key is no 400) nor claimed (no replay, no key kept).
    const patch = (key: string, first_name: string) =>
      t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${id}`,
        payload: { first_name },
        headers: { 'idempotency-key': key },
      })
    expect((await patch('has space', 'One')).statusCode).toBe(200)
    expect((await patch('patch-1', 'Two')).json()).toMatchObject({ first_name: 'Two' })
    const again = await patch('patch-1', 'Three')
    expect(again.headers['idempotent-replayed']).toBeUndefined()
    expect(again.json()).toMatchObject({ first_name: 'Three' })
    const read = await t.inject(acme, {
      method: 'GET',
      url: `/api/v1/contacts/${id}`,
      headers: { 'idempotency-key': '' },
    })
    expect(read.statusCode).toBe(200)
    expect(await t.db.selectFrom('idempotency_keys').select('key').execute()).toEqual([])
  })

  it('a POST refused for a condition it does not evaluate leaves its key unclaimed', async () => {
    const refused = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'cond@example.com' },
      headers: { 'idempotency-key': 'cond-1', 'if-match': '"x"' },
    })
    expectProblem(refused, 400, 'invalid_parameter')
    expect(await t.db.selectFrom('idempotency_keys').select('key').execute()).toEqual([])
    const created = await post('cond-1', { email: 'cond@example.com' })
    expect(created.statusCode).toBe(201)
    expect(created.headers['idempotent-replayed']).toBeUndefined()
  })

  it('keeps at most IDEMPOTENCY_KEYS_PER_ACCOUNT answers per account: the oldest are evicted, other accounts untouched', async () => {
    const small = await createTestHarness({ dialect, clock, env: { IDEMPOTENCY_KEYS_PER_ACCOUNT: '3' } })
    try {
      const [a, b] = [await small.createAccount('A'), await small.createAccount('B')]
      const send = (account: TestAccount, key: string) =>
        small.inject(account, {
          method: 'POST',
          url: '/api/v1/contacts',
          payload: { first_name: key },
          headers: { 'idempotency-key': key },
        })
      expect((await send(b, 'b-1')).statusCode).toBe(201)
      for (let i = 1; i <= 6; i++) {
        clock.advance(1000)
        expect((await send(a, `a-${i}`)).statusCode).toBe(201)
      }
      const kept = async (accountId: string) =>
        (
          await small.db
            .selectFrom('idempotency_keys')
            .select('key')
            .where('account_id', '=', accountId)
            .orderBy('key')
            .execute()
        ).map((row) => row.key)
      expect(await kept(a.id)).toEqual(['a-4', 'a-5', 'a-6'])
      expect(await kept(b.id)).toEqual(['b-1'])
      // A kept key still replays; an evicted one runs as a new request (a second contact).
      expect((await send(a, 'a-6')).headers['idempotent-replayed']).toBe('true')
      const again = await send(a, 'a-1')
      expect(again.statusCode).toBe(201)
      expect(again.headers['idempotent-replayed']).toBeUndefined()
    } finally {
      await small.close()
    }
  })
})
