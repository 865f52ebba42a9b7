// GET /events in feed order, GET /events/{id} and the retention purge, on every dialect. The
// concurrent proof of the order is test/events-feed-order.test.ts (PostgreSQL server).
import { sql } from 'kysely'
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
      if (page.events.length < 2) {
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

  it('an empty feed and a caught-up walk still answer a cursor, which goes on from there', async () => {
    const empty = await list(acme)
    expect(empty.events).toEqual([])
    expect(empty.next_cursor).toEqual(expect.any(String))
    const first = await createContact(t, acme, { first_name: 'First' })
    const page = await list(acme, `?after=${encodeURIComponent(empty.next_cursor ?? '')}`)
    expect(page.events.map((e) => e.data.object.id)).toEqual([first.id])
    const end = await list(acme, `?after=${encodeURIComponent(page.next_cursor ?? '')}`)
    expect(end.events).toEqual([])
    const second = await createContact(t, acme, { first_name: 'Second' })
    const next = await list(acme, `?after=${encodeURIComponent(end.next_cursor ?? '')}`)
    expect(next.events.map((e) => e.data.object.id)).toEqual([second.id])
  })

  it('from=now starts at the end of the feed: only events committed later', async () => {
    await createContact(t, acme, { first_name: 'Before' })
    const now = await list(acme, '?from=now')
    expect(now.events).toEqual([])
    const later = await createContact(t, acme, { first_name: 'Later' })
    const page = await list(acme, `?after=${encodeURIComponent(now.next_cursor ?? '')}`)
    expect(page.events.map((e) => e.data.object.id)).toEqual([later.id])
  })

  it('wait=N answers as soon as an event is committed, and an empty page with its cursor after N s', async () => {
    const start = await list(acme, '?from=now')
    const cursor = encodeURIComponent(start.next_cursor ?? '')
    const began = performance.now()
    const polled = list(acme, `?after=${cursor}&wait=20`)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const made = await createContact(t, acme, { first_name: 'Awaited' })
    const page = await polled
    const elapsed = performance.now() - began
    expect(page.events.map((e) => e.data.object.id)).toEqual([made.id])
    // Woken by the commit, not by the end of the wait.
    expect(elapsed).toBeLessThan(10_000)

    const quiet = performance.now()
    const timedOut = await list(acme, `?after=${encodeURIComponent(page.next_cursor ?? '')}&wait=1`)
    expect(timedOut.events).toEqual([])
    expect(performance.now() - quiet).toBeGreaterThanOrEqual(900)
    expect(timedOut.next_cursor).toEqual(expect.any(String))
  })

  it("a contact's commit on this instance wakes its account's long polls at once", async () => {
    const woken = t.deps.feedSignal.next(acme.id, 60_000, new AbortController().signal)
    await createContact(t, acme, { first_name: 'Signalled' })
    expect(await woken).toBe(true)
  })

  it.runIf(dialect === 'postgres')(
    'a signalled event held back by an older transaction answers the poll soon after that transaction ends',
    async () => {
      const start = await list(acme, '?from=now')
      const cursor = encodeURIComponent(start.next_cursor ?? '')
      let ended = 0
      let made: { id: string } | undefined
      const polled = list(acme, `?after=${cursor}&wait=20`).then((page) => ({ page, at: performance.now() }))
      // A transaction with an id, older than the event's: the feed serves the event only once it ends
      // (src/events/feed-position.ts). Before, the poll woken by the commit read nothing, then waited
      // for its re-check and the probe: about a second after the transaction's end.
      await t.db.transaction().execute(async (trx) => {
        await sql`select pg_current_xact_id()`.execute(trx)
        await new Promise((resolve) => setTimeout(resolve, 200))
        made = await createContact(t, acme, { first_name: 'Held back' })
        await new Promise((resolve) => setTimeout(resolve, 200))
        ended = performance.now()
      })
      const { page, at } = await polled
      expect(page.events.map((e) => e.data.object.id)).toEqual([made?.id])
      expect(at - ended).toBeLessThan(500)
    },
  )

  it('a long poll holds no database connection while it waits: more polls than the pool, and others are served', async () => {
    const start = await list(acme, '?from=now')
    const cursor = encodeURIComponent(start.next_cursor ?? '')
    // More waiting polls than PostgreSQL's pool has connections (10).
    const polls = Array.from({ length: 40 }, () => list(acme, `?after=${cursor}&wait=20`))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const other = await t.createAccount('Neighbour')
    for (let i = 0; i < 5; i++) {
      expect((await t.inject(other, { method: 'GET', url: '/api/v1/contacts' })).statusCode).toBe(200)
    }
    const pool = t.deps.database.poolStats?.()
    if (pool) {
      expect(pool.waiting).toBe(0)
      expect(pool.idle).toBeGreaterThan(0)
    }
    const made = await createContact(t, acme, { first_name: 'For everyone' })
    for (const page of await Promise.all(polls)) {
      expect(page.events.map((e) => e.data.object.id)).toEqual([made.id])
    }
  })

  it('an event no signal announced (another instance wrote it) answers a waiting poll within about a second', async () => {
    const start = await list(acme, '?from=now')
    const cursor = encodeURIComponent(start.next_cursor ?? '')
    const polls = Array.from({ length: 5 }, () => list(acme, `?after=${cursor}&wait=20`))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const began = performance.now()
    await inTransaction(t.db, (trx) =>
      recordEvent(trx, acme.id, 'contact.created', JSON.stringify({ id: 'con_elsewhere' }), clock.now().toISOString()),
    )
    for (const page of await Promise.all(polls)) {
      expect(page.events.map((e) => e.data.object.id)).toEqual(['con_elsewhere'])
    }
    expect(performance.now() - began).toBeLessThan(5_000)
  })

  it("waiting long polls do not count among the account's requests in progress", async () => {
    const limited = await createTestHarness({ dialect, clock, env: { MAX_CONCURRENT_REQUESTS_PER_ACCOUNT: '2' } })
    try {
      const owner = await limited.createAccount()
      const get = (url: string) => limited.inject(owner, { method: 'GET', url })
      const start = (await get('/api/v1/events?from=now')).json()
      // Opened one after another: until it starts waiting, a poll is a request in progress.
      const polls = []
      for (let i = 0; i < 6; i++) {
        polls.push(get(`/api/v1/events?after=${encodeURIComponent(start.next_cursor)}&wait=1`))
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      // Six polls wait, and the account's limit of 2 requests in progress still has room.
      expect((await get('/api/v1/me')).statusCode).toBe(200)
      expect((await Promise.all(polls)).map((res) => res.statusCode)).toEqual([200, 200, 200, 200, 200, 200])
    } finally {
      await limited.close()
    }
  })

  it("another account's commit does not answer a long poll", async () => {
    const other = await t.createAccount('Other')
    const start = await list(acme, '?from=now')
    const polled = list(acme, `?after=${encodeURIComponent(start.next_cursor ?? '')}&wait=1`)
    await createContact(t, other, { first_name: 'Elsewhere' })
    expect((await polled).events).toEqual([])
  })

  it('refuses wait outside 0–30 and from=now with after', async () => {
    const cursor = (await list(acme)).next_cursor ?? ''
    for (const [query, field] of [
      ['wait=31', 'wait'],
      ['wait=-1', 'wait'],
      ['wait=1.5', 'wait'],
      ['from=start', 'from'],
      [`from=now&after=${encodeURIComponent(cursor)}`, 'from'],
    ]) {
      const body = expectProblem(
        await t.inject(acme, { method: 'GET', url: `/api/v1/events?${query}` }),
        400,
        'invalid_parameter',
      )
      expect(body.errors[0].field).toBe(field)
    }
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
