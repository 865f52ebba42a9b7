// GET /events in feed order and GET /events/{id}, on every dialect. The concurrent proof of the
// order is test/events-feed-order.test.ts (PostgreSQL server).
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, TEST_SECRET, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem } from '../../test/helpers.js'
import { encodeCursor } from '../http/pagination.js'
import { manualClock } from '../lib/clock.js'

interface EventsPage {
  events: Array<{ id: string; type: string; data: { object: { id: string } } }>
  next_cursor: string | null
}

describe.each(testDialects())('events on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  const clock = manualClock(new Date('2026-11-01T00:00:00.000Z'))
  beforeEach(async () => {
    t = await createTestHarness({ dialect, clock })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const list = async (account: TestAccount, query = ''): Promise<EventsPage> => {
    const res = await t.inject(account, { method: 'GET', url: `/api/v1/events${query}` })
    expect(res.statusCode, res.body).toBe(200)
    return res.json()
  }

  it('GET /events/{id} answers an event of this account as the list shows it; any other id is 404', async () => {
    const contact = await createContact(t, acme, { email: 'ada@example.com' })
    const [event] = (await list(acme)).events
    expect(event).toMatchObject({ type: 'contact.created', data: { object: { id: contact.id } } })
    const res = await t.inject(acme, { method: 'GET', url: `/api/v1/events/${event?.id}` })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.json()).toEqual(event)

    const bob = await t.createAccount('Bob')
    const others: Array<[TestAccount, string | undefined]> = [
      [bob, event?.id],
      [acme, 'evt_01JZZZZZZZZZZZZZZZZZZZZZZZ'],
      [acme, 'nonsense'],
      [acme, contact.id],
    ]
    for (const [account, id] of others) {
      expectProblem(await t.inject(account, { method: 'GET', url: `/api/v1/events/${id}` }), 404, 'not_found')
    }
    expectProblem(
      await t.inject(acme, { method: 'GET', url: `/api/v1/events/${event?.id}?x=1` }),
      400,
      'invalid_parameter',
    )
  })

  it('pages the feed in the order the changes were committed, each event once', async () => {
    const contact = await createContact(t, acme, { email: 'ada@example.com' })
    for (let i = 0; i < 5; i++) {
      await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${contact.id}`, payload: { first_name: `A${i}` } })
    }
    await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${contact.id}` })
    const seen: string[] = []
    let after = ''
    for (;;) {
      const page = await list(acme, `?limit=2${after}`)
      seen.push(...page.events.map((e) => e.type))
      if (page.next_cursor === null) {
        break
      }
      after = `&after=${page.next_cursor}`
    }
    expect(seen).toEqual(['contact.created', ...Array(5).fill('contact.updated'), 'contact.deleted'])
  })

  it('a cursor issued before events had positions (a bare id) goes on after that event', async () => {
    for (let i = 0; i < 3; i++) {
      await createContact(t, acme, { first_name: `C${i}` })
    }
    // As the migration leaves events written before it: position 0, in id order.
    await t.db.updateTable('events').set({ tx_id: 0 }).where('account_id', '=', acme.id).execute()
    const all = (await list(acme)).events.map((e) => e.id)
    const old = encodeCursor(TEST_SECRET, { list: 'events', accountId: acme.id, filters: {} }, all[0] as string)
    await createContact(t, acme, { first_name: 'After' })
    const page = await list(acme, `?after=${old}`)
    expect(page.events.map((e) => e.id)).toEqual([...all.slice(1), expect.any(String)])
    expect(page.events.at(-1)?.data.object).toMatchObject({ first_name: 'After' })
  })
})
