// The writes of one contact (contact-writes.ts): on PostgreSQL each is one statement between BEGIN
// and COMMIT, and on every dialect they leave the contact, its tag and term rows (only the changed
// ones rewritten), the count and the event.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { captureStatements } from '../../test/statement-capture.js'
import { liveTenant } from '../accounts/tenant.js'
import { AppError } from '../http/errors.js'
import { contactCount } from './contact-count.js'
import { createContactService } from './contact-service.js'

// Before any pool connects: src/db/database.ts binds each connection's query when it opens.
const capture = captureStatements()
afterAll(() => capture.restore())

/** The statements of the contact writes, first words only; the API key's own bookkeeping left out. */
const writeStatements = () =>
  capture
    .take()
    .filter((text) => !/api_keys/.test(text))
    .map((text) => text.trim().split(/\s+/).slice(0, 3).join(' ').toLowerCase())

describe.each(testDialects())('contact writes on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount

  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterAll(() => t.close())

  const rowsOf = async (id: string) => ({
    tags: (
      await t.db
        .selectFrom('contact_tags')
        .select('tag')
        .where('account_id', '=', acme.id)
        .where('contact_id', '=', id)
        .execute()
    )
      .map((row) => row.tag)
      .sort(),
    terms: (
      await t.db
        .selectFrom('contact_terms')
        .select('term')
        .where('account_id', '=', acme.id)
        .where('contact_id', '=', id)
        .execute()
    )
      .map((row) => row.term)
      .sort(),
  })
  const eventsOf = async (id: string) =>
    (
      await t.db
        .selectFrom('events')
        .select(['type', 'body'])
        .where('account_id', '=', acme.id)
        .orderBy('tx_id')
        .orderBy('id')
        .execute()
    )
      .map((row) => ({
        type: row.type,
        body: JSON.parse(row.body) as { id: string; type: string; data: { object: { id: string } } },
      }))
      .filter((event) => event.body.data.object.id === id)

  it.runIf(dialect !== 'sqlite')(
    'a create, an update and a delete are one statement each between BEGIN and COMMIT',
    async () => {
      await t.inject(acme, { method: 'GET', url: '/api/v1/me' }) // the key, cached from here on
      capture.take()
      const created = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'ada@example.com', first_name: 'Ada', tags: ['vip'] },
      })
      expect(created.statusCode, created.body).toBe(201)
      expect(writeStatements()).toEqual(['begin', 'with contact as', 'commit'])

      const id = created.json().id as string
      const patched = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${id}`,
        payload: { last_name: 'Lovelace', tags: ['vip', 'customer'] },
      })
      expect(patched.statusCode, patched.body).toBe(200)
      // The lock (which reads the contact the change merges into), then the write.
      expect(writeStatements()).toEqual(['begin', 'update contacts set', 'with contact as', 'commit'])

      expect((await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${id}` })).statusCode).toBe(204)
      expect(writeStatements()).toEqual(['begin', 'with contact as', 'commit'])
    },
  )

  // Named statements are per connection, and only without a transaction pooler (db/database.ts).
  // Sequential requests take the pool's most recently idle connection, as the query below does.
  it.runIf(dialect === 'postgres' && !process.env.TEST_POOLER_URL)(
    "the writes are prepared, and one contact's settle on generic plans instead of being planned per call",
    async () => {
      const created = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'plans@example.com', tags: ['a'] },
      })
      const id = created.json().id as string
      for (let i = 0; i < 10; i++) {
        const patched = await t.inject(acme, {
          method: 'PATCH',
          url: `/api/v1/contacts/${id}`,
          payload: { first_name: `Name ${i}`, tags: [`tag ${i}`] },
        })
        expect(patched.statusCode, patched.body).toBe(200)
      }
      // A group of several: its statement is prepared too (custom plans: they know the arrays).
      const batch = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts/batch',
        payload: {
          operations: [
            { op: 'create', contact: { email: 'plans-2@example.com' } },
            { op: 'create', contact: { email: 'plans-3@example.com' } },
          ],
        },
      })
      expect(batch.statusCode, batch.body).toBe(200)
      const prepared = await sql<{ statement: string; generic_plans: number; custom_plans: number }>`
        select statement, generic_plans::int, custom_plans::int from pg_prepared_statements`.execute(t.db)
      const rows = prepared.rows.filter((row) =>
        /with contact as \(\s+update contacts set email_lower = \$/.test(row.statement),
      )
      expect(rows, JSON.stringify(rows)).toHaveLength(1)
      expect(rows[0]?.generic_plans, JSON.stringify(rows)).toBeGreaterThan(0)
      expect(
        prepared.rows.filter((row) => /insert into contacts[^;]+ as r\(id, email_lower/.test(row.statement)),
      ).toHaveLength(1)
    },
  )

  it('a create writes the contact, its tag and term rows, the count and contact.created', async () => {
    const before = await contactCount(t.db, acme.id)
    const created = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'Grace@Example.com', first_name: 'Grace', last_name: 'Hopper', tags: ['navy', 'cobol'] },
    })
    expect(created.statusCode, created.body).toBe(201)
    const contact = created.json()
    expect(await rowsOf(contact.id)).toEqual({
      tags: ['cobol', 'navy'],
      terms: ['grace', 'grace@example.com', 'hopper'],
    })
    expect(await contactCount(t.db, acme.id)).toBe(before + 1)
    const events = await eventsOf(contact.id)
    expect(events.map((event) => event.type)).toEqual(['contact.created'])
    expect(events[0]?.body.data.object).toEqual(contact)
  })

  it('an update rewrites only the tag and term rows that changed, and records contact.updated', async () => {
    const contact = (
      await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'alan@example.com', first_name: 'Alan', last_name: 'Turing', tags: ['a', 'b'] },
      })
    ).json()
    const patched = await t.inject(acme, {
      method: 'PATCH',
      url: `/api/v1/contacts/${contact.id}`,
      payload: { last_name: 'Mathison', company: 'Bletchley Park', tags: ['b', 'c'] },
    })
    expect(patched.statusCode, patched.body).toBe(200)
    expect(await rowsOf(contact.id)).toEqual({
      tags: ['b', 'c'],
      terms: ['alan', 'alan@example.com', 'bletchley park', 'mathison'],
    })
    const events = await eventsOf(contact.id)
    expect(events.map((event) => event.type)).toEqual(['contact.created', 'contact.updated'])
    expect(events[1]?.body.data.object).toEqual(patched.json())
    // The list filters read those rows.
    const byTag = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?tag=a' })
    expect(byTag.json().contacts.map((c: { id: string }) => c.id)).not.toContain(contact.id)
    const byName = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?q=mathi' })
    expect(byName.json().contacts.map((c: { id: string }) => c.id)).toEqual([contact.id])
  })

  it('a delete removes the rows, takes one from the count and records the contact as it was', async () => {
    const contact = (
      await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'edsger@example.com', tags: ['goto'] },
      })
    ).json()
    const before = await contactCount(t.db, acme.id)
    expect((await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${contact.id}` })).statusCode).toBe(204)
    expect(await rowsOf(contact.id)).toEqual({ tags: [], terms: [] })
    expect(await contactCount(t.db, acme.id)).toBe(before - 1)
    const events = await eventsOf(contact.id)
    expect(events.map((event) => event.type)).toEqual(['contact.created', 'contact.deleted'])
    expect(events[1]?.body.data.object).toEqual(contact)
    // A second delete finds nothing and changes nothing.
    expect((await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${contact.id}` })).statusCode).toBe(404)
    expect(await contactCount(t.db, acme.id)).toBe(before - 1)
  })

  it('the quota counts every earlier change of the transaction, deletes included', async () => {
    const account = await t.createAccount('Quota')
    const contacts = createContactService({ db: t.db, clock: t.deps.clock, maxContacts: 1, maxTestContacts: 1 })
    const kept = await contacts.create(liveTenant(account.id), { email: 'kept@example.com' })
    const refused = await contacts
      .create(liveTenant(account.id), { email: 'second@example.com' })
      .catch((caught: unknown) => caught)
    expect(refused).toBeInstanceOf(AppError)
    expect((refused as AppError).code).toBe('quota_exceeded')
    expect(await contactCount(t.db, account.id)).toBe(1)
    // A delete and a create in one transaction: one contact, within the quota of 1.
    const results = await contacts.applyBatch(liveTenant(account.id), [
      { op: 'delete', id: kept.contact.id },
      { op: 'create', input: { email: 'new@example.com' } },
    ])
    expect(results.map((result) => ('error' in result ? result.error.code : result.status))).toEqual([204, 201])
    expect(await contactCount(t.db, account.id)).toBe(1)
    // Past it, the create alone is refused, the delete before it kept.
    const next = await contacts.applyBatch(liveTenant(account.id), [
      { op: 'create', input: { email: 'third@example.com' } },
    ])
    expect(next.map((result) => ('error' in result ? result.error.code : result.status))).toEqual(['quota_exceeded'])
    expect(await contactCount(t.db, account.id)).toBe(1)
  })
})
