// Test mode through the API, as an integrator meets it (docs/test-mode.md): a service_test_ key
// acts on the account's test data only, and a live key on its live data only; each mode has its
// own quota, rate limit, idempotency answers, events and webhook endpoints; every object says
// which mode it belongs to.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { expectProblem, snapshotAccount } from '../../test/helpers.js'
import { staticResolver } from '../../test/static-resolver.js'
import { liveTenant, testTenant } from './tenant.js'

describe.each(testDialects())('test mode on %s', (dialect) => {
  let t: TestHarness
  let live: TestAccount
  let test: TestAccount
  beforeAll(async () => {
    t = await createTestHarness({
      dialect,
      env: { MAX_TEST_CONTACTS_PER_ACCOUNT: '3' },
      resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'] }),
    })
    live = await t.createAccount('Acme')
    test = await t.testMode(live)
  })
  afterAll(() => t.close())

  const create = (as: TestAccount, payload: object, headers: Record<string, string> = {}) =>
    t.inject(as, { method: 'POST', url: '/api/v1/contacts', payload, headers })
  const list = async (as: TestAccount, path = '/api/v1/contacts') => {
    const res = await t.inject(as, { method: 'GET', url: path })
    expect(res.statusCode, res.body).toBe(200)
    return res.json()
  }

  it('a test key is service_test_ and verifies as the same account with livemode false', async () => {
    expect(test.key).toMatch(/^service_test_[A-Za-z0-9]{32}$/)
    const me = await t.inject(test, { method: 'GET', url: '/api/v1/me' })
    expect(me.statusCode, me.body).toBe(200)
    expect(me.json()).toMatchObject({ object: 'account', id: live.id, name: 'Acme', livemode: false })
    expect(me.json().limits.contacts_max).toBe(3)
    const liveMe = (await t.inject(live, { method: 'GET', url: '/api/v1/me' })).json()
    expect(liveMe).toMatchObject({ id: live.id, livemode: true, limits: { contacts_max: 1_000_000 } })
  })

  it("each mode sees only its own contacts: the other mode's ids are 404 and nothing changes", async () => {
    const inTest = await create(test, { email: 'sandbox@example.com', first_name: 'Sandy' })
    expect(inTest.statusCode, inTest.body).toBe(201)
    expect(inTest.json()).toMatchObject({ livemode: false })
    const inLive = await create(live, { email: 'sandbox@example.com', first_name: 'Real' })
    // The same email in both modes: they are separate tenants.
    expect(inLive.statusCode, inLive.body).toBe(201)
    expect(inLive.json()).toMatchObject({ livemode: true })

    for (const [as, other] of [
      [live, inTest.json().id],
      [test, inLive.json().id],
    ] as const) {
      const before = await snapshotAccount(t, { ...live, id: as === live ? testTenant(live.id).id : live.id })
      for (const request of [
        { method: 'GET', url: `/api/v1/contacts/${other}` },
        { method: 'PATCH', url: `/api/v1/contacts/${other}`, payload: { first_name: 'Crossed' } },
        { method: 'DELETE', url: `/api/v1/contacts/${other}` },
      ] as const) {
        expectProblem(await t.inject(as, request), 404, 'not_found')
      }
      expect(await snapshotAccount(t, { ...live, id: as === live ? testTenant(live.id).id : live.id })).toEqual(before)
    }
    expect((await list(test)).contacts.map((c: { id: string }) => c.id)).toEqual([inTest.json().id])
    expect((await list(live)).contacts.map((c: { id: string }) => c.id)).toEqual([inLive.json().id])
  })

  it("another account's test key never reaches this account's test data", async () => {
    const bob = await t.testMode(await t.createAccount('Bob'))
    const mine = (await create(test, { first_name: 'Mine' })).json()
    expectProblem(await t.inject(bob, { method: 'GET', url: `/api/v1/contacts/${mine.id}` }), 404, 'not_found')
    expect((await list(bob)).contacts).toEqual([])
  })

  it('test events are in the test feed only, and carry livemode at the top and in data.object', async () => {
    const events = (await list(test, '/api/v1/events')).events
    expect(events.length).toBeGreaterThan(0)
    for (const event of events) {
      expect(event).toMatchObject({ livemode: false, data: { object: { livemode: false } } })
    }
    const liveEvents = (await list(live, '/api/v1/events')).events
    expect(liveEvents.every((e: { livemode: boolean }) => e.livemode)).toBe(true)
    const testIds = new Set(events.map((e: { id: string }) => e.id))
    expect(liveEvents.some((e: { id: string }) => testIds.has(e.id))).toBe(false)
    expectProblem(await t.inject(live, { method: 'GET', url: `/api/v1/events/${events[0].id}` }), 404, 'not_found')
  })

  it('a cursor of one mode is refused in the other', async () => {
    const account = await t.createAccount('Cursors')
    for (const first_name of ['One', 'Two']) {
      expect((await create(account, { first_name })).statusCode).toBe(201)
    }
    const cursor = (await list(account, '/api/v1/contacts?limit=1')).next_cursor
    expect(cursor).toBeTruthy()
    const sandbox = await t.testMode(account)
    const crossed = await t.inject(sandbox, { method: 'GET', url: `/api/v1/contacts?limit=1&after=${cursor}` })
    expectProblem(crossed, 400, 'invalid_cursor')
  })

  it('test mode has its own quota: reaching it leaves live creates untouched', async () => {
    const account = await t.createAccount('Quota')
    const sandbox = await t.testMode(account)
    for (let i = 0; i < 3; i++) {
      expect((await create(sandbox, { first_name: `T${i}` })).statusCode).toBe(201)
    }
    const refused = await create(sandbox, { first_name: 'One too many' })
    expectProblem(refused, 403, 'quota_exceeded')
    // It names the test quota: the live one is far from reached.
    expect(refused.json().detail).toBe(
      "This account's test mode has reached its limit of 3 test contacts; delete some, or all test data, to create more.",
    )
    expect((await create(account, { first_name: 'Live still works' })).statusCode).toBe(201)
  })

  it('an Idempotency-Key answer of one mode is not replayed in the other', async () => {
    const headers = { 'idempotency-key': 'same-key-in-both-modes' }
    const first = await create(test, { first_name: 'Idem' }, headers)
    const other = await create(live, { first_name: 'Idem' }, headers)
    expect(first.statusCode).toBe(201)
    expect(other.statusCode).toBe(201)
    expect(other.headers['idempotent-replayed']).toBeUndefined()
    expect(other.json().id).not.toBe(first.json().id)
    const again = await create(test, { first_name: 'Idem' }, headers)
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(again.json().id).toBe(first.json().id)
  })

  it("webhook endpoints belong to their mode: the other mode's key gets 404", async () => {
    const res = await t.inject(test, {
      method: 'POST',
      url: '/api/v1/webhook_endpoints',
      payload: { url: 'https://hooks.example.com/test' },
    })
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json()).toMatchObject({ livemode: false })
    const id = res.json().id
    expectProblem(await t.inject(live, { method: 'GET', url: `/api/v1/webhook_endpoints/${id}` }), 404, 'not_found')
    expect((await list(live, '/api/v1/webhook_endpoints')).webhook_endpoints).toEqual([])
    expect((await list(test, '/api/v1/webhook_endpoints')).webhook_endpoints.map((e: { id: string }) => e.id)).toEqual([
      id,
    ])
  })

  it('test mode keeps the live rules for endpoint URLs: a private address is refused alike', async () => {
    for (const as of [test, live]) {
      const res = await t.inject(as, {
        method: 'POST',
        url: '/api/v1/webhook_endpoints',
        payload: { url: 'https://127.0.0.1/hooks' },
      })
      expectProblem(res, 400, 'invalid_parameter')
    }
  })

  it('a key whose mode word does not match its stored mode is refused like any invalid key', async () => {
    // The digest binds a key to its row: swapping the word gives a key that matches no row.
    const swapped = test.key.replace('service_test_', 'service_live_')
    expectProblem(
      await t.inject({ ...test, key: swapped }, { method: 'GET', url: '/api/v1/me' }),
      401,
      'invalid_api_key',
    )
  })

  it('the tenants of an account are its own id and a test id tied to it', () => {
    expect(liveTenant(live.id)).toEqual({ id: live.id, accountId: live.id, livemode: true })
    expect(testTenant(live.id)).toEqual({ id: `${live.id}_test`, accountId: live.id, livemode: false })
  })
})

describe.each(testDialects())('test mode rate limits on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '2' } })
  })
  afterAll(() => t.close())

  it('spending the test budget leaves the live budget whole', async () => {
    const live = await t.createAccount()
    const test = await t.testMode(live)
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      statuses.push((await t.inject(test, { method: 'GET', url: '/api/v1/me' })).statusCode)
    }
    expect(statuses).toContain(429)
    const liveMe = await t.inject(live, { method: 'GET', url: '/api/v1/me' })
    expect(liveMe.statusCode).toBe(200)
    expect(liveMe.headers.ratelimit).toMatch(/r=1\b/)
  })
})
