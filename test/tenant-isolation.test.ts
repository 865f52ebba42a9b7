// No request through one account's key may see or touch another account's data.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'
import { createContact, expectProblem, snapshotAccount } from './helpers.js'

describe.each(testDialects())('tenant isolation on %s', (dialect) => {
  let t: TestHarness
  let a: TestAccount
  let b: TestAccount
  let aContact: { id: string; email: string }
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    a = await t.createAccount('A')
    b = await t.createAccount('B')
    aContact = await createContact(t, a, { email: 'a-only@example.com', first_name: 'Alice', tags: ['secret'] })
    await createContact(t, b, { email: 'b-own@example.com', first_name: 'Bob', tags: ['secret'] })
  })
  afterAll(() => t.close())

  it("every by-id endpoint answers B's key about A's contact exactly as about a missing id, and A's data is unchanged", async () => {
    const before = await snapshotAccount(t, a)
    const missing = 'con_01M00000000000000000000000'
    for (const [method, payload] of [
      ['GET', undefined],
      ['PATCH', { first_name: 'Mallory', email: 'mallory@example.com' }],
      ['DELETE', undefined],
    ] as const) {
      const theirs = await t.inject(b, {
        method,
        url: `/api/v1/contacts/${aContact.id}`,
        ...(payload ? { payload } : {}),
      })
      const none = await t.inject(b, { method, url: `/api/v1/contacts/${missing}`, ...(payload ? { payload } : {}) })
      const body = expectProblem(theirs, 404, 'not_found')
      expect({ ...body, request_id: '' }).toEqual({ ...expectProblem(none, 404, 'not_found'), request_id: '' })
    }
    expect(await snapshotAccount(t, a)).toEqual(before)
  })

  it("B's key asking for A's event is answered exactly as for a missing id", async () => {
    const [aEvent] = (await t.inject(a, { method: 'GET', url: '/api/v1/events?limit=1' })).json().events
    expect((await t.inject(a, { method: 'GET', url: `/api/v1/events/${aEvent.id}` })).statusCode).toBe(200)
    const theirs = expectProblem(
      await t.inject(b, { method: 'GET', url: `/api/v1/events/${aEvent.id}` }),
      404,
      'not_found',
    )
    const none = expectProblem(
      await t.inject(b, { method: 'GET', url: '/api/v1/events/evt_01M00000000000000000000000' }),
      404,
      'not_found',
    )
    expect({ ...theirs, request_id: '' }).toEqual({ ...none, request_id: '' })
  })

  it("B's lists, filters and events never contain A's rows", async () => {
    for (const query of ['', '?tag=secret', '?q=alice', '?q=a', '?email=a-only@example.com', '?order=desc']) {
      const res = await t.inject(b, { method: 'GET', url: `/api/v1/contacts${query}` })
      expect(res.statusCode).toBe(200)
      expect(res.body, query).not.toContain(aContact.id)
      expect(res.body).not.toContain('a-only@example.com')
    }
    const events = await t.inject(b, { method: 'GET', url: '/api/v1/events' })
    expect(events.body).not.toContain(aContact.id)
  })

  it("B's upsert with A's email creates B's own contact", async () => {
    const res = await t.inject(b, {
      method: 'POST',
      url: '/api/v1/contacts/upsert',
      payload: { email: aContact.email, last_name: 'B' },
    })
    expect(res.statusCode).toBe(201)
    expect(res.json().id).not.toBe(aContact.id)
    const aView = await t.inject(a, { method: 'GET', url: `/api/v1/contacts/${aContact.id}` })
    expect(aView.json().last_name).toBeNull()
  })

  it('account_id in a body is refused, never honoured', async () => {
    for (const [method, url] of [
      ['POST', '/api/v1/contacts'],
      ['PATCH', `/api/v1/contacts/${aContact.id}`],
    ] as const) {
      const res = await t.inject(a, { method, url, payload: { email: 'z@example.com', account_id: b.id } })
      expect(expectProblem(res, 400, 'invalid_parameter').errors).toEqual([
        { field: 'account_id', message: 'is read-only' },
      ])
    }
  })

  it("A's cursor replayed with B's key is 400 invalid_cursor", async () => {
    for (let i = 0; i < 3; i++) {
      await createContact(t, a, { first_name: `Page ${i}` })
    }
    const page = (await t.inject(a, { method: 'GET', url: '/api/v1/contacts?limit=1' })).json()
    expect(page.next_cursor).toEqual(expect.any(String))
    const res = await t.inject(b, {
      method: 'GET',
      url: `/api/v1/contacts?limit=1&after=${encodeURIComponent(page.next_cursor)}`,
    })
    expectProblem(res, 400, 'invalid_cursor')
  })
})
