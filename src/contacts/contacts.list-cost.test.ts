// Bounded cost per list page: with `q` or `updated_after` matching too many contacts for
// their index, a page walks the id order and examines at most SCAN_MAX (1,000) rows; a page cut
// short ends where its scan stopped, short or empty, with a cursor that continues the scan. Only a
// null next_cursor means the end, and a walk still sees every match exactly once.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact } from '../../test/helpers.js'
import { manualClock } from '../lib/clock.js'
import { newId } from '../lib/ids.js'
import { applyContactInput, emptyContact, toContactRows } from './contacts.js'
import { listBounds } from './contacts.list-query.js'

const defaults = { ...listBounds }

interface Walk {
  ids: string[]
  pages: number[]
}

describe.each(testDialects())('list cost on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount

  /** Every page of `query` at `limit`, through HTTP: the ids in order and each page's size. */
  async function walk(query: string, limit: number): Promise<Walk> {
    const ids: string[] = []
    const pages: number[] = []
    let after: string | null = null
    do {
      const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?limit=${limit}&${query}${cursor}` })
      expect(res.statusCode, res.body).toBe(200)
      const body = res.json() as { contacts: Array<{ id: string }>; next_cursor: string | null }
      ids.push(...body.contacts.map((c) => c.id))
      pages.push(body.contacts.length)
      after = body.next_cursor
      expect(pages.length).toBeLessThan(2000)
    } while (after !== null)
    return { ids, pages }
  }

  describe('at the real bounds: 1,200 other contacts, then 2,100 whose email starts with r9-', () => {
    const matching: string[] = []
    let attackStart = ''

    beforeAll(async () => {
      t = await createTestHarness({ dialect })
      acme = await t.createAccount('Acme')
      // Written straight to the tables (toContactRows, as the bench seeds): 3,300 POSTs take too long.
      const insert = async (count: number, email: (i: number) => string, at: string) => {
        for (let batch = 0; batch < count; batch += 300) {
          const rows = []
          for (let i = batch; i < Math.min(batch + 300, count); i++) {
            const contact = applyContactInput(emptyContact(newId('contact'), at, true), { email: email(i) }, at)
            rows.push(toContactRows(acme.id, contact))
          }
          await t.db
            .insertInto('contacts')
            .values(rows.map((r) => r.contact))
            .execute()
          await t.db
            .insertInto('contact_terms')
            .values(rows.flatMap((r) => r.terms))
            .execute()
          if (email(0).startsWith('r9-')) {
            matching.push(...rows.map((r) => r.contact.id))
          }
        }
      }
      await insert(1200, (i) => `person${i}@example.com`, '2026-01-01T00:00:00.000Z')
      attackStart = '2026-06-01T00:00:00.000Z'
      await insert(2100, (i) => `r9-${i}@attacker.test`, '2026-06-02T00:00:00.000Z')
    }, 120_000)
    afterAll(() => t.close())

    it.each([
      ['q=r9-', () => 'q=r9-'],
      ['updated_after', () => `updated_after=${attackStart}`],
    ])('%s: the first page examined 1,000 rows, found none, and says to go on', async (_name, query) => {
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?limit=100&${query()}` })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json().contacts).toEqual([])
      expect(typeof res.json().next_cursor).toBe('string')
    })

    it.each([
      ['q=r9-', () => 'q=r9-', 'asc'],
      ['q=r9- desc', () => 'q=r9-&order=desc', 'desc'],
      ['updated_after', () => `updated_after=${attackStart}`, 'asc'],
    ])('%s: the walk returns every match exactly once, in order', async (_name, query, order) => {
      const { ids, pages } = await walk(query(), 100)
      expect(ids).toEqual(order === 'asc' ? matching : [...matching].reverse())
      // Every page examined at most 1,000 rows, so no page held more than the 1,000 it examined
      // and 2,100 matches took at least 22 pages of 100; ascending, the first was empty.
      expect(pages.length).toBeGreaterThanOrEqual(22)
      if (order === 'asc') {
        expect(pages[0]).toBe(0)
      }
    })
  })

  describe('with the bounds lowered: a scan cut short every few rows', () => {
    const clock = manualClock()
    const ids: Record<string, string> = {}
    let midway = ''

    beforeAll(async () => {
      t = await createTestHarness({ dialect, clock })
      acme = await t.createAccount('Acme')
      const other = await t.createAccount('Other')
      for (let i = 0; i < 30; i++) {
        const name = i % 4 === 0 ? `Mara${i}` : `Zed${i}`
        const created = await createContact(t, acme, { first_name: name, tags: i % 3 === 0 ? ['vip'] : [] })
        ids[name] = created.id
        await createContact(t, other, { first_name: `Mara${i}` })
        clock.advance(1000)
        if (i === 14) {
          // Contact 15's creation time: updated_after is strict, so 16 and later match.
          midway = clock.now().toISOString()
        }
      }
    })
    afterAll(() => t.close())
    afterEach(() => {
      Object.assign(listBounds, defaults)
    })

    const names = (walked: Walk) =>
      walked.ids.map((id) => Object.keys(ids).find((name) => ids[name] === id) ?? `unknown ${id}`)

    it.each<[string, () => string, (i: number) => boolean, boolean]>([
      ['q=mara', () => 'q=mara', (i) => i % 4 === 0, false],
      ['q=mara desc', () => 'q=mara&order=desc', (i) => i % 4 === 0, true],
      ['q=mara&tag=vip', () => 'q=mara&tag=vip', (i) => i % 12 === 0, false],
      ['updated_after', () => `updated_after=${midway}`, (i) => i >= 16, false],
      [
        'updated_after&q=zed&order=desc',
        () => `updated_after=${midway}&q=zed&order=desc`,
        (i) => i >= 16 && i % 4 !== 0,
        true,
      ],
    ])('%s: every match once, in order, at any page size and scan bound', async (_name, query, matches, desc) => {
      const expected = Array.from({ length: 30 }, (_, i) => i)
        .filter(matches)
        .map((i) => (i % 4 === 0 ? `Mara${i}` : `Zed${i}`))
      if (desc) {
        expected.reverse()
      }
      listBounds.indexedMax = 0
      for (const scanMax of [1, 2, 5]) {
        listBounds.scanMax = scanMax
        for (const limit of [1, 2, 100]) {
          const walked = await walk(query(), limit)
          expect(names(walked)).toEqual(expected)
          // No page holds more than it examined; the scan moved scanMax rows a page at most.
          expect(Math.max(...walked.pages)).toBeLessThanOrEqual(Math.min(scanMax, limit))
        }
      }
    })

    it('a short page with a cursor: the walk has empty pages and ends with a null cursor only', async () => {
      listBounds.indexedMax = 0
      listBounds.scanMax = 3
      const walked = await walk('q=mara', 100)
      expect(walked.pages).toContain(0)
      expect(walked.ids).toHaveLength(8)
    })

    it('a contact deleted during the walk is skipped, the others appear once', async () => {
      listBounds.indexedMax = 0
      listBounds.scanMax = 4
      const first = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=1&q=mara' })
      const seen = first.json().contacts.map((c: { id: string }) => c.id)
      expect(seen).toEqual([ids.Mara0])
      await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${ids.Mara4}` })
      let after = first.json().next_cursor
      while (after) {
        const res = await t.inject(acme, {
          method: 'GET',
          url: `/api/v1/contacts?limit=1&q=mara&after=${encodeURIComponent(after)}`,
        })
        seen.push(...res.json().contacts.map((c: { id: string }) => c.id))
        after = res.json().next_cursor
      }
      expect(seen).toEqual([0, 8, 12, 16, 20, 24, 28].map((i) => ids[`Mara${i}`]))
    })
  })
})
