// A list page that examines many rows costs more than one request of the account's rate limit
//: one per ROWS_PER_REQUEST rows examined, charged after the page and reported in the
// RateLimit header. A cheap page, a full page of a walk, and a page found by an index cost one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { manualClock } from '../lib/clock.js'
import { newId } from '../lib/ids.js'
import { applyContactInput, emptyContact, toContactRows } from './contacts.js'

const BURST = 100

describe.each(testDialects())('list charge on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  // No time passes, so no token comes back between requests: each header shows what a page cost.
  const clock = manualClock(new Date('2026-11-24T12:00:00.000Z'))

  beforeAll(async () => {
    t = await createTestHarness({
      dialect,
      clock,
      env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: String(BURST) },
    })
    acme = await t.createAccount('Acme')
    // Written straight to the tables, as in contacts.list-cost.test.ts: 1,200 contacts, then 2,100
    // whose email starts with r9- (more than the probe's 500, late in id order: the worst case).
    const insert = async (count: number, email: (i: number) => string) => {
      const at = clock.now().toISOString()
      for (let batch = 0; batch < count; batch += 300) {
        const rows = []
        for (let i = batch; i < Math.min(batch + 300, count); i++) {
          rows.push(
            toContactRows(
              acme.id,
              applyContactInput(emptyContact(newId('contact'), at, true), { email: email(i) }, at),
            ),
          )
        }
        await t.db
          .insertInto('contacts')
          .values(rows.map((r) => r.contact))
          .execute()
        await t.db
          .insertInto('contact_terms')
          .values(rows.flatMap((r) => r.terms))
          .execute()
      }
    }
    await insert(1200, (i) => `person${i}@example.com`)
    await insert(2100, (i) => `r9-${i}@attacker.test`)
  }, 120_000)
  afterAll(() => t.close())

  /** Requests left after a GET of `url`, from its RateLimit header. */
  async function left(url: string): Promise<number> {
    const res = await t.inject(acme, { method: 'GET', url })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.headers['ratelimit-policy']).toBe(`"account";q=${BURST};w=${BURST}`)
    const remaining = /^"account";r=(-?\d+);t=\d+$/.exec(String(res.headers.ratelimit))?.[1]
    expect(remaining, String(res.headers.ratelimit)).toBeDefined()
    return Number(remaining)
  }

  it('a plain page costs one request; the worst-case q page, which examined 1,000 rows, costs ten', async () => {
    const start = await left('/api/v1/contacts?limit=100')
    const worst = await left('/api/v1/contacts?limit=100&q=r9-')
    expect(start - worst).toBe(10)
    // An email (one index entry) and a rare q found by its index cost one each.
    expect(start - 10 - (await left('/api/v1/contacts?limit=100&email=person7@example.com'))).toBe(1)
    expect(start - 11 - (await left('/api/v1/contacts?limit=100&q=person1199'))).toBe(1)
  })

  it('a full page of a walk costs the positions it passed, not only its rows', async () => {
    // The first page's window ends at position 1,000; the next one's matches start at 1,201, so its
    // page of 101 fills at position 1,301: about 300 positions passed, three requests.
    const first = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=100&q=r9-' })
    const cursor = encodeURIComponent(String(first.json().next_cursor))
    const start = await left('/api/v1/contacts?limit=100')
    const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?limit=100&q=r9-&after=${cursor}` })
    expect(res.json().contacts).toHaveLength(100)
    expect(res.headers.ratelimit).toBe(`"account";r=${start - 3};t=${BURST - start + 3}`)
  })

  it('a walk whose page fills early costs one; one that reads a window costs by the rows it passed', async () => {
    // q=person matches 1,200 (more than the probe allows): the walk fills its page of 101 within
    // the first 101 positions.
    const start = await left('/api/v1/contacts?limit=100')
    expect(start - (await left('/api/v1/contacts?limit=100&q=person'))).toBe(1)
    // From the end backwards, q=person's matches start after the 2,100 attack contacts: the first
    // page examines a whole window and finds none.
    const before = await left('/api/v1/contacts?limit=10')
    expect(before - (await left('/api/v1/contacts?limit=10&q=person&order=desc'))).toBe(10)
  })
})
