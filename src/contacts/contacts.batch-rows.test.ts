// For the same inputs, a batch of creates (one group of writeContacts, contact-writes.ts) stores
// exactly the rows and events that POST /contacts stores one by one (every column, ids aside), on
// every dialect.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { manualClock } from '../lib/clock.js'

const INPUTS = [
  {
    email: 'Ada@Example.com',
    first_name: 'Ada',
    last_name: 'Lovelace',
    company: 'Analytical  Engines',
    tags: ['vip', 'b', 'vip'],
  },
  { first_name: 'Zoe\u0308', phone: '+44 20 7946 0958', custom_fields: { plan: 'pro', seats: 3, trial: false } },
  { last_name: 'Same', first_name: 'same', company: 'SAME', job_title: 'CTO' },
  { email: 'grace@example.com', phone: '+1 (415) 555-0100', tags: [] },
  // 500+ tag rows in all: more than one statement's chunk.
  ...Array.from({ length: 12 }, (_, i) => ({
    email: `many${i}@example.com`,
    last_name: `Tags ${i}`,
    tags: Array.from({ length: 50 }, (_, j) => `tag-${j}`),
  })),
]

describe.each(testDialects())('batch creates store what POST /contacts stores, on %s', (dialect) => {
  let t: TestHarness
  let single: TestAccount
  let batched: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({ dialect, clock: manualClock() })
    single = await t.createAccount('Single')
    batched = await t.createAccount('Batched')
  })
  afterEach(() => t.close())

  /** Every stored row of the account, its ids replaced by their order of creation. */
  const storedRows = async (account: TestAccount) => {
    const contacts = await t.db
      .selectFrom('contacts')
      .selectAll()
      .where('account_id', '=', account.id)
      .orderBy('id')
      .execute()
    const ids = new Map(contacts.map((c, i) => [c.id, `contact-${i}`]))
    const events = await t.db
      .selectFrom('events')
      .selectAll()
      .where('account_id', '=', account.id)
      .orderBy('tx_id')
      .orderBy('id')
      .execute()
    for (const [i, e] of events.entries()) {
      ids.set(e.id, `event-${i}`)
    }
    const tags = await t.db.selectFrom('contact_tags').selectAll().where('account_id', '=', account.id).execute()
    const terms = await t.db.selectFrom('contact_terms').selectAll().where('account_id', '=', account.id).execute()
    const anonymous = (value: unknown): string =>
      [...ids]
        .reduce((text, [id, name]) => text.replaceAll(id, name), JSON.stringify(value))
        .replaceAll(account.id, 'account')
    const sorted = (rows: unknown[]) => rows.map(anonymous).sort()
    return {
      contacts: contacts.map(anonymous),
      // The feed position differs (one per transaction); the order within the account's feed does not.
      events: events.map(({ tx_id: _, ...event }) => anonymous(event)),
      tags: sorted(tags),
      terms: sorted(terms),
    }
  }

  it('writes the same contacts, tag rows, search-term rows and events, in the same order', async () => {
    const answers: string[] = []
    for (const payload of INPUTS) {
      const res = await t.inject(single, { method: 'POST', url: '/api/v1/contacts', payload })
      expect(res.statusCode, res.body).toBe(201)
      answers.push(res.body)
    }
    const res = await t.inject(batched, {
      method: 'POST',
      url: '/api/v1/contacts/batch',
      payload: { operations: INPUTS.map((contact) => ({ op: 'create', contact })) },
    })
    expect(res.statusCode, res.body).toBe(200)
    const { results } = res.json() as { results: Array<{ status: number; contact: { id: string } }> }
    expect(results.map((r) => r.status)).toEqual(INPUTS.map(() => 201))
    // Each answer is the single endpoint's, byte for byte once the ids are aligned.
    results.forEach((result, i) => {
      const singleId = (JSON.parse(answers[i] as string) as { id: string }).id
      expect(JSON.stringify(result.contact)).toBe((answers[i] as string).replaceAll(singleId, result.contact.id))
    })
    const [a, b] = [await storedRows(single), await storedRows(batched)]
    expect(b.contacts).toEqual(a.contacts)
    expect(b.tags).toEqual(a.tags)
    expect(b.terms).toEqual(a.terms)
    expect(b.events).toEqual(a.events)
    expect(b.tags).toHaveLength(12 * 50 + 2)
  })

  it('answers a run of creates whose emails are taken, in the batch or before it, with 409 naming the contact', async () => {
    const first = await t.inject(batched, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'a@example.com' },
    })
    const res = await t.inject(batched, {
      method: 'POST',
      url: '/api/v1/contacts/batch',
      payload: {
        operations: [
          { op: 'create', contact: { email: 'A@example.com' } },
          { op: 'create', contact: { email: 'b@example.com' } },
          { op: 'create', contact: { email: 'B@Example.com' } },
        ],
      },
    })
    const { results } = res.json() as { results: Array<{ status: number; contact?: { id: string }; problem?: object }> }
    expect(results.map((r) => r.status)).toEqual([409, 201, 409])
    expect(results[0]?.problem).toMatchObject({ existing_id: first.json().id })
    expect(results[2]?.problem).toMatchObject({ existing_id: results[1]?.contact?.id })
  })
})
