// The two plans of the `q` and `updated_after` filters (few matches: driven by an index and sorted;
// many: the id walk) must give the same pages. Through HTTP a test reaches only the few-matches
// plan with a handful of contacts, so this calls the planner with the threshold at both extremes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact } from '../../test/helpers.js'
import { manualClock } from '../lib/clock.js'
import { listContactRows, prefixUpperBound } from './contacts.list-query.js'
import type { ListContactsFilters } from './contacts.schemas.js'

describe('prefixUpperBound', () => {
  it('is the least string above every string with the prefix, in code-point order', () => {
    expect(prefixUpperBound('mar')).toBe('mas')
    expect(prefixUpperBound('a\u{10ffff}')).toBe('b')
    expect(prefixUpperBound('\u{d7ff}')).toBe('\u{e000}')
    expect(prefixUpperBound('é')).toBe('ê')
    expect(prefixUpperBound('\u{10ffff}')).toBeUndefined()
  })
})

describe.each(testDialects())('list plans on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  let other: TestAccount
  const clock = manualClock()
  let midway = ''

  const people = [
    { first_name: 'Maria', last_name: 'Martin', company: 'Acme', tags: ['vip'] },
    { first_name: 'Mark', email: 'mark@example.com', tags: ['lead'] },
    { first_name: 'Ada', last_name: 'Marsh', company: 'Mar  Tech', tags: ['vip', 'lead'] },
    { first_name: 'Grace', email: 'grace@marine.example', company: 'Navy' },
    { first_name: 'Émile', last_name: 'Zola', tags: ['vip'] },
    { first_name: '100%', last_name: 'M_r', company: 'Percent' },
    { first_name: 'mar', tags: ['lead'] },
    { first_name: 'Zoë', company: 'MARS', tags: ['vip'] },
  ]

  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock })
    acme = await t.createAccount('Acme')
    other = await t.createAccount('Other')
    for (const [i, person] of people.entries()) {
      await createContact(t, acme, person)
      await createContact(t, other, { first_name: person.first_name })
      clock.advance(1000)
      if (i === 3) {
        midway = clock.now().toISOString()
      }
    }
    // Renames move a contact between prefixes: its terms must follow.
    const zola = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?q=zola' })).json().contacts[0]
    await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${zola.id}`, payload: { last_name: 'Marceau' } })
  })
  afterAll(() => t.close())

  /** Every page of a walk at `limit`, as the route would fetch them, with the threshold given. */
  async function walk(
    filters: ListContactsFilters,
    limit: number,
    indexedMax: number,
    scanMax = 1000,
  ): Promise<string[]> {
    const names: string[] = []
    let afterId: string | undefined
    for (;;) {
      const { rows, scannedTo } = await listContactRows(
        t.db,
        acme.id,
        { ...filters, afterId, fetch: limit + 1 },
        indexedMax,
        scanMax,
      )
      const page = rows.slice(0, limit)
      names.push(...page.map((row) => JSON.parse(row.body).first_name as string))
      if (rows.length <= limit && scannedTo === undefined) {
        return names
      }
      afterId = rows.length > limit ? page[page.length - 1]?.id : scannedTo
    }
  }

  it.each<[string, Partial<ListContactsFilters>, string[]]>([
    ['q=mar', { q: 'mar' }, ['Maria', 'Mark', 'Ada', 'Émile', 'mar', 'Zoë']],
    ['q=MAR desc', { q: 'MAR', order: 'desc' }, ['Zoë', 'mar', 'Émile', 'Ada', 'Mark', 'Maria']],
    ['q=mar t (white space collapsed)', { q: 'mar t' }, ['Ada']],
    ['q=mar with a tag', { q: 'mar', tag: 'vip' }, ['Maria', 'Ada', 'Émile', 'Zoë']],
    ['q=mar with updated_after', { q: 'mar', updated_after: '' }, ['Émile', 'mar', 'Zoë']],
    ['q=mar with updated_after, desc', { q: 'mar', updated_after: '', order: 'desc' }, ['Zoë', 'mar', 'Émile']],
    ['q=ma with a tag, desc', { q: 'ma', tag: 'lead', order: 'desc' }, ['mar', 'Ada', 'Mark']],
    ['q=mar with an email', { q: 'mar', email: 'MARK@example.com' }, ['Mark']],
    ['q=% (a literal percent sign)', { q: '100%' }, ['100%']],
    ['q=m_ (a literal underscore)', { q: 'm_' }, ['100%']],
    ['q=zola (renamed away)', { q: 'zola' }, []],
    ['q=é', { q: 'É' }, ['Émile']],
    ['q=nobody', { q: 'nobody' }, []],
  ])('%s: the same contacts, in id order, with either plan and any page size', async (_name, filters, expected) => {
    const resolved: ListContactsFilters = {
      order: 'asc',
      ...filters,
      ...(filters.updated_after === '' ? { updated_after: midway } : {}),
    }
    for (const limit of [1, 2, 100]) {
      expect(await walk(resolved, limit, 0)).toEqual(expected)
      expect(await walk(resolved, limit, 1000)).toEqual(expected)
      // The id walk cut short every 1, 2 or 3 rows examined.
      for (const scanMax of [1, 2, 3]) {
        expect(await walk(resolved, limit, 0, scanMax)).toEqual(expected)
      }
    }
  })
})
