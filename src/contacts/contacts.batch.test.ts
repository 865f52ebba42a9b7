// POST /contacts/batch through HTTP on every dialect: per-item answers in order, each what its
// single endpoint would say; events per change in order; one Idempotency-Key for the batch; the
// rate limit charged per operation; a malformed envelope refused whole with nothing done.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem, snapshotAccount } from '../../test/helpers.js'
import { contactCount } from './contact-count.js'

type Result = { status: number; contact?: { id: string; email: string | null }; problem?: Record<string, unknown> }

describe.each(testDialects())('POST /contacts/batch on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const batch = (account: TestAccount, operations: unknown, headers: Record<string, string> = {}) =>
    t.inject(account, { method: 'POST', url: '/api/v1/contacts/batch', payload: { operations }, headers })
  const resultsOf = (res: { statusCode: number; body: string; json(): unknown }): Result[] => {
    expect(res.statusCode, res.body).toBe(200)
    return (res.json() as { results: Result[] }).results
  }
  const eventsOf = async (account: TestAccount) =>
    (await t.inject(account, { method: 'GET', url: '/api/v1/events?limit=100' })).json().events as Array<{
      type: string
      data: { object: { id: string } }
    }>

  it('answers each operation in order, a failure in the middle failing only itself', async () => {
    const ada = await createContact(t, acme, { email: 'ada@example.com', first_name: 'Ada' })
    const gone = await createContact(t, acme, { email: 'gone@example.com' })
    const res = await batch(acme, [
      { op: 'create', contact: { email: 'one@example.com', tags: ['a', 'b'] } },
      { op: 'create', contact: { email: 'ADA@example.com' } },
      { op: 'create', contact: { email: 'not-an-email' } },
      { op: 'update', id: ada.id, contact: { last_name: 'Lovelace' } },
      { op: 'delete', id: gone.id },
      { op: 'upsert', contact: { email: 'one@example.com', company: 'Acme' } },
      { op: 'upsert', contact: { email: 'new@example.com' } },
      { op: 'create', contact: { first_name: 'Pat', phone: 'not a phone' } },
      { op: 'delete', id: gone.id },
      { op: 'create', contact: { email: 'two@example.com' } },
    ])
    const results = resultsOf(res)
    expect(results.map((r) => r.status)).toEqual([201, 409, 400, 200, 204, 200, 201, 400, 404, 201])
    expect(results[0]?.contact).toMatchObject({ email: 'one@example.com' })
    expect(results[1]?.problem).toMatchObject({
      code: 'contact_exists',
      existing_id: ada.id,
      request_id: res.headers['request-id'],
      errors: [{ field: '/operations/1/contact/email', message: 'is already used by another contact' }],
    })
    expect(results[2]?.problem).toMatchObject({
      type: '/docs/errors#invalid_parameter',
      title: 'Invalid parameter',
      status: 400,
      code: 'invalid_parameter',
      detail: 'email must be an email address',
      errors: [{ field: '/operations/2/contact/email', message: 'must be an email address' }],
    })
    expect(results[3]?.contact).toMatchObject({ id: ada.id, first_name: 'Ada', last_name: 'Lovelace' })
    expect(results[4]).toEqual({ status: 204 })
    expect(results[5]?.contact).toMatchObject({ id: results[0]?.contact?.id, company: 'Acme', tags: ['a', 'b'] })
    expect(results[7]?.problem).toMatchObject({
      code: 'invalid_parameter',
      errors: [{ field: '/operations/7/contact/phone' }],
    })
    expect(results[8]?.problem).toMatchObject({ code: 'not_found', status: 404 })

    // Each result is what the single endpoint answers for the same input.
    const single = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'not-an-email' } })
    const { request_id: _a, ...singleProblem } = single.json()
    const { request_id: _b, ...itemProblem } = results[2]?.problem ?? {}
    expect(itemProblem).toEqual({
      ...singleProblem,
      errors: [{ ...singleProblem.errors[0], field: '/operations/2/contact/email' }],
    })

    // The events of the changes, in the order of the operations, after the two seeded creates.
    const events = (await eventsOf(acme)).slice(2)
    expect(events.map((e) => [e.type, e.data.object.id])).toEqual([
      ['contact.created', results[0]?.contact?.id],
      ['contact.updated', ada.id],
      ['contact.deleted', gone.id],
      ['contact.updated', results[0]?.contact?.id],
      ['contact.created', results[6]?.contact?.id],
      ['contact.created', results[9]?.contact?.id],
    ])
    expect(await contactCount(t.db, acme.id)).toBe(4)
    const stored = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${results[5]?.contact?.id}` })
    expect(stored.json()).toEqual(results[5]?.contact)
    // The contact's tag and search rows were written with it.
    const byTag = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?tag=b' })
    expect(byTag.json().contacts.map((c: { id: string }) => c.id)).toEqual([results[0]?.contact?.id])
    const byQ = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?q=two' })
    expect(byQ.json().contacts.map((c: { id: string }) => c.id)).toEqual([results[9]?.contact?.id])
  })

  it('sees the effect of earlier operations of the batch: duplicates within it, a freed email', async () => {
    const ada = await createContact(t, acme, { email: 'ada@example.com' })
    const results = resultsOf(
      await batch(acme, [
        { op: 'create', contact: { email: 'dup@example.com' } },
        { op: 'create', contact: { email: 'Dup@Example.com' } },
        { op: 'delete', id: ada.id },
        { op: 'create', contact: { email: 'ada@example.com' } },
        { op: 'update', id: ada.id, contact: { first_name: 'Ada' } },
        { op: 'upsert', contact: { email: 'up@example.com' } },
        { op: 'create', contact: { email: 'up@example.com' } },
        { op: 'create', contact: { email: 'pair@example.com' } },
        { op: 'upsert', contact: { email: 'PAIR@example.com', first_name: 'Pat' } },
      ]),
    )
    expect(results.map((r) => r.status)).toEqual([201, 409, 204, 201, 404, 201, 409, 201, 200])
    expect(results[1]?.problem).toMatchObject({ existing_id: results[0]?.contact?.id })
    expect(results[6]?.problem).toMatchObject({ existing_id: results[5]?.contact?.id })
    expect(results[8]?.contact).toMatchObject({ id: results[7]?.contact?.id, first_name: 'Pat' })
  })

  it('refuses an update to an email another contact has, as PATCH does, and writes the rest', async () => {
    const ada = await createContact(t, acme, { email: 'ada@example.com' })
    const bob = await createContact(t, acme, { email: 'bob@example.com' })
    const patch = await t.inject(acme, {
      method: 'PATCH',
      url: `/api/v1/contacts/${bob.id}`,
      payload: { email: 'ADA@example.com' },
    })
    expectProblem(patch, 409, 'contact_exists')
    const results = resultsOf(
      await batch(acme, [
        { op: 'update', id: bob.id, contact: { email: 'ADA@example.com' } },
        { op: 'update', id: bob.id, contact: { first_name: 'Bob' } },
      ]),
    )
    expect(results.map((r) => r.status)).toEqual([409, 200])
    const { request_id: _a, errors: patchErrors, ...patchProblem } = patch.json()
    expect(results[0]?.problem).toMatchObject({
      ...patchProblem,
      existing_id: ada.id,
      errors: [{ ...patchErrors[0], field: '/operations/0/contact/email' }],
    })
  })

  it('answers another account’s ids with item 404s and leaves its contacts alone', async () => {
    const globex = await t.createAccount('Globex')
    const theirs = await createContact(t, globex, { email: 'theirs@example.com' })
    const before = await snapshotAccount(t, globex)
    const results = resultsOf(
      await batch(acme, [
        { op: 'update', id: theirs.id, contact: { first_name: 'Mallory' } },
        { op: 'delete', id: theirs.id },
        { op: 'create', contact: { email: 'theirs@example.com' } },
      ]),
    )
    expect(results.map((r) => r.status)).toEqual([404, 404, 201])
    expect(results[0]?.problem).toMatchObject({
      code: 'not_found',
      detail: 'No contact with this id exists in this account.',
    })
    expect(await snapshotAccount(t, globex)).toEqual(before)
  })

  it('replays the first answer for the same Idempotency-Key, running nothing again', async () => {
    const operations = [
      { op: 'create', contact: { email: 'a@example.com' } },
      { op: 'create', contact: { email: 'bad' } },
    ]
    const first = await batch(acme, operations, { 'idempotency-key': 'batch-1' })
    expect(first.statusCode).toBe(200)
    const again = await batch(acme, operations, { 'idempotency-key': 'batch-1' })
    expect(again.statusCode).toBe(200)
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(again.body).toBe(first.body)
    expect(await contactCount(t.db, acme.id)).toBe(1)
    expect(await eventsOf(acme)).toHaveLength(1)
    const other = await batch(acme, [operations[0]], { 'idempotency-key': 'batch-1' })
    expectProblem(other, 422, 'idempotency_key_reused')
  })

  it('refuses a malformed envelope whole with 400, doing nothing', async () => {
    const ada = await createContact(t, acme, { email: 'ada@example.com' })
    const before = await snapshotAccount(t, acme)
    const many = Array.from({ length: 101 }, (_, i) => ({ op: 'create', contact: { email: `c${i}@example.com` } }))
    const cases: Array<[unknown, string]> = [
      [[], 'operations must have at least 1 item'],
      [many, 'operations must have at most 100 items'],
      [
        [
          { op: 'delete', id: ada.id },
          { op: 'merge', contact: {} },
        ],
        'operations.1.op must be one of create, upsert, update, delete',
      ],
      [
        [
          { op: 'delete', id: ada.id },
          { op: 'update', contact: {} },
        ],
        'operations.1.id is required',
      ],
      [[{ op: 'create', id: ada.id, contact: { email: 'x@example.com' } }], 'operations.0.id is not a known field'],
      [[{ op: 'delete' }], 'operations.0.id is required'],
      ['create', 'operations must be an array'],
    ]
    for (const [operations, detail] of cases) {
      const res = await batch(acme, operations)
      expect(expectProblem(res, 400, 'invalid_parameter').detail).toBe(detail)
    }
    const notObject = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts/batch', payload: [1] })
    expectProblem(notObject, 400, 'invalid_parameter')
    expect(await snapshotAccount(t, acme)).toEqual(before)
  })

  it('writes 100 creates of 50 tags each in one batch (5,000 tag rows: within each dialect’s bound on parameters)', async () => {
    const tags = Array.from({ length: 50 }, (_, i) => `tag-${i}`)
    const operations = Array.from({ length: 100 }, (_, i) => ({
      op: 'create',
      contact: { email: `many${i}@example.com`, first_name: 'Many', last_name: `Tags ${i}`, company: 'Acme', tags },
    }))
    const results = resultsOf(await batch(acme, operations))
    expect(results.map((r) => r.status)).toEqual(Array(100).fill(201))
    const tagged = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?tag=tag-49&limit=100' })
    expect(tagged.json().contacts).toHaveLength(100)
    expect(await eventsOf(acme)).toHaveLength(100)
  })

  it('needs a key with write access', async () => {
    const readOnly = { ...acme, key: await t.createKey(acme, { scopes: ['read'] }) }
    const res = await batch(readOnly, [{ op: 'create', contact: { email: 'a@example.com' } }])
    expectProblem(res, 403, 'insufficient_scope')
    expect(await contactCount(t.db, acme.id)).toBe(0)
  })
})

describe.each(testDialects())('POST /contacts/batch limits on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({
      dialect,
      env: { MAX_CONTACTS_PER_ACCOUNT: '3', RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '10' },
    })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const batch = (operations: unknown) =>
    t.inject(acme, { method: 'POST', url: '/api/v1/contacts/batch', payload: { operations } })

  it('refuses the creates past the quota one by one, as POST /contacts would, and keeps the rest', async () => {
    const ada = await createContact(t, acme, { email: 'ada@example.com' })
    const res = await batch([
      { op: 'create', contact: { email: 'b@example.com' } },
      { op: 'create', contact: { email: 'c@example.com' } },
      { op: 'upsert', contact: { email: 'd@example.com' } },
      { op: 'create', contact: { email: 'e@example.com' } },
      { op: 'delete', id: ada.id },
      { op: 'create', contact: { email: 'f@example.com' } },
      { op: 'upsert', contact: { email: 'b@example.com', first_name: 'B' } },
    ])
    expect(res.statusCode, res.body).toBe(200)
    const results = res.json().results as Result[]
    expect(results.map((r) => r.status)).toEqual([201, 201, 403, 403, 204, 201, 200])
    expect(results[2]?.problem).toMatchObject({
      code: 'quota_exceeded',
      detail: 'This account has reached its limit of 3 contacts; delete some to create more.',
    })
    expect(await contactCount(t.db, acme.id)).toBe(3)
  })

  it('charges one request per operation: a batch over the budget is 429 with nothing done', async () => {
    // Burst 10: a batch of 10 spends it all (1 by the key's hook, 9 by the route).
    const ten = Array.from({ length: 10 }, (_, i) => ({ op: 'upsert', contact: { email: `u${i}@example.com` } }))
    const first = await batch(ten.slice(0, 3))
    expect(first.statusCode, first.body).toBe(200)
    expect(first.headers.ratelimit).toMatch(/^"account";r=7;/)
    const over = await batch(ten)
    expectProblem(over, 429, 'rate_limited')
    expect(over.headers['retry-after']).toBeDefined()
    expect(await contactCount(t.db, acme.id)).toBe(3)
    const events = await t.db.selectFrom('events').select('id').where('account_id', '=', acme.id).execute()
    expect(events).toHaveLength(3)
  })
})
