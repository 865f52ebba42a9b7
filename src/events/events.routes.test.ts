// GET /events in feed order, GET /events/{id} and the retention purge, on every dialect. The
// concurrent proof of the order is test/events-feed-order.test.ts (PostgreSQL server).
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, TEST_SECRET, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem, recordEvent } from '../../test/helpers.js'
import { inTransaction } from '../db/transaction.js'
import { encodeCursor } from '../http/pagination.js'
import { manualClock } from '../lib/clock.js'
import { purgeExpiredEvents } from './events.store.js'

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

  it('several events of one transaction keep their order, and positions never go back after a purge', async () => {
    const now = () => clock.now().toISOString()
    await inTransaction(t.db, async (trx) => {
      for (const id of ['con_1', 'con_2', 'con_3']) {
        await recordEvent(trx, acme.id, 'contact.created', JSON.stringify({ id }), now())
      }
    })
    expect((await list(acme)).events.map((e) => e.data.object.id)).toEqual(['con_1', 'con_2', 'con_3'])
    const first = await list(acme, '?limit=1')
    expect(first.next_cursor).not.toBeNull()
    // Every event is purged; one written later must still come after the cursor held meanwhile.
    clock.advance(40 * 86_400_000)
    expect(await purgeExpiredEvents(t.db, clock.now(), 30)).toBe(3)
    await inTransaction(t.db, (trx) =>
      recordEvent(trx, acme.id, 'contact.created', JSON.stringify({ id: 'con_4' }), now()),
    )
    const next = await list(acme, `?after=${first.next_cursor}`)
    expect(next.events.map((e) => e.data.object.id)).toEqual(['con_4'])
  })

  it('purges events older than the retention, in batches, and keeps the rest', async () => {
    const bob = await t.createAccount('Bob')
    const write = (account: TestAccount, id: string) =>
      inTransaction(t.db, (trx) =>
        recordEvent(trx, account.id, 'contact.created', JSON.stringify({ id }), clock.now().toISOString()),
      )
    for (let i = 0; i < 7; i++) {
      await write(i % 2 ? acme : bob, `con_old${i}`)
    }
    clock.advance(10 * 86_400_000)
    await write(acme, 'con_recent')
    clock.advance(25 * 86_400_000)
    // 35 days after the first seven, 25 after the recent one: only the first seven are past 30 days.
    expect(await purgeExpiredEvents(t.db, clock.now(), 30, 3)).toBe(7)
    expect((await list(acme)).events.map((e) => e.data.object.id)).toEqual(['con_recent'])
    expect((await list(bob)).events).toEqual([])
    expect(await purgeExpiredEvents(t.db, clock.now(), 30)).toBe(0)
  })
})
