// GET /events in commit order (docs/design.md#events): a poller that walks the feed and comes back from its
// cursor never misses an event, even one whose transaction commits after the poller passed its id.
// On the PostgreSQL server only: it takes transactions open at once, and PGlite is one connection
// (a transaction left open there holds every other query back), SQLite one writer.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { inTransaction } from '../src/db/transaction.js'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'
import { recordEvent } from './helpers.js'

interface Poller {
  /** Every event id received, in order, each once. */
  seen: string[]
  /** Ids received again other than by reading the previous poll's last page again: must stay empty. */
  duplicates: string[]
  /** Reads from its cursor to the end of the feed. */
  poll(): Promise<void>
}

/**
 * A consumer of the feed: pages of `limit` from its cursor until a page is short of the limit (the
 * feed's end). It keeps the last cursor it was given, which goes on from where the feed ended, so
 * no event is read twice.
 */
function feedPoller(t: TestHarness, account: TestAccount, limit = 1): Poller {
  let cursor: string | undefined
  const seen: string[] = []
  const known = new Set<string>()
  const duplicates: string[] = []
  return {
    seen,
    duplicates,
    async poll() {
      for (;;) {
        const after = cursor === undefined ? '' : `&after=${cursor}`
        // app.inject, not t.inject: the harness's inject waits for the feed to catch up, and the
        // fence is what these tests test.
        const res = await t.app.inject({
          method: 'GET',
          url: `/api/v1/events?limit=${limit}${after}`,
          headers: { authorization: `Bearer ${account.key}` },
        })
        expect(res.statusCode).toBe(200)
        const page = res.json() as { events: Array<{ id: string }>; next_cursor: string }
        for (const { id } of page.events) {
          if (known.has(id)) {
            duplicates.push(id)
          } else {
            known.add(id)
            seen.push(id)
          }
        }
        cursor = page.next_cursor
        if (page.events.length < limit) {
          return
        }
      }
    },
  }
}

const eventIds = async (t: TestHarness, account: TestAccount): Promise<string[]> =>
  (await t.db.selectFrom('events').select('id').where('account_id', '=', account.id).execute()).map((r) => r.id)

/**
 * Polls until the poller has seen `expected` or `ms` have passed. Other transactions on the
 * server (another suite's) hold the feed back for as long as they stay open, never longer.
 */
async function pollUntil(poller: Poller, expected: number, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (poller.seen.length < expected && Date.now() < deadline) {
    await poller.poll()
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(testDialects().includes('postgres'))('the events feed in commit order on the PostgreSQL server', () => {
  let t: TestHarness
  beforeEach(async () => {
    t = await createTestHarness({ dialect: 'postgres' })
  })
  afterEach(() => t.close())

  const write = (account: TestAccount, contactId: string) =>
    inTransaction(t.db, (trx) =>
      recordEvent(trx, account.id, 'contact.created', JSON.stringify({ id: contactId }), new Date().toISOString()),
    )

  it('an event committed after a poller passed its id is still delivered from the poller’s cursor', async () => {
    const acme = await t.createAccount()
    await write(acme, 'con_first')

    // A writes its event (the lower id) and stays open; B writes and commits after it.
    let commitA!: () => void
    let aWrote!: () => void
    const aWritten = new Promise<void>((resolve) => {
      aWrote = resolve
    })
    const a = inTransaction(t.db, async (trx) => {
      await recordEvent(trx, acme.id, 'contact.created', JSON.stringify({ id: 'con_a' }), new Date().toISOString())
      aWrote()
      await new Promise<void>((resolve) => {
        commitA = resolve
      })
    })
    await aWritten
    await write(acme, 'con_b')
    await write(acme, 'con_c')

    // The poller walks the feed and keeps its cursor; then A commits.
    const poller = feedPoller(t, acme)
    await poller.poll()
    commitA()
    await a

    const all = await eventIds(t, acme)
    expect(all).toHaveLength(4)
    await pollUntil(poller, all.length)
    expect([...poller.seen].sort()).toEqual([...all].sort())
    expect(poller.duplicates).toEqual([])
  })

  it('several writers with random commit delays: a poller walking all along sees every committed event once', async () => {
    const acme = await t.createAccount()
    const poller = feedPoller(t, acme, 3)
    const WRITERS = 6
    const TRANSACTIONS = 10
    let writing = true

    const writer = async (w: number) => {
      for (let i = 0; i < TRANSACTIONS; i++) {
        const events = 1 + Math.floor(Math.random() * 3)
        // One transaction in eight rolls back: its events must never be served.
        const abort = Math.random() < 1 / 8
        await inTransaction(t.db, async (trx) => {
          for (let e = 0; e < events; e++) {
            await recordEvent(
              trx,
              acme.id,
              'contact.created',
              JSON.stringify({ id: `con_${w}_${i}_${e}` }),
              new Date().toISOString(),
            )
            await sleep(Math.random() * 15)
          }
          await sleep(Math.random() * 30)
          if (abort) {
            throw new Error('rolled back')
          }
        }).catch((error: Error) => {
          if (!abort) {
            throw error
          }
        })
      }
    }
    const polling = (async () => {
      while (writing) {
        await poller.poll()
        await sleep(Math.random() * 10)
      }
    })()
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)))
    writing = false
    await polling

    const all = await eventIds(t, acme)
    await pollUntil(poller, all.length)
    expect(poller.duplicates).toEqual([])
    expect([...poller.seen].sort()).toEqual([...all].sort())
    expect(all.length).toBeGreaterThan(0)
  })
})
