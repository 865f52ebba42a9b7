import { createHash, createHmac } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, TEST_SECRET, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem } from '../../test/helpers.js'
import { manualClock } from '../lib/clock.js'

interface Page {
  contacts: Array<{ id: string }>
  next_cursor: string | null
}

describe.each(testDialects())('cursor pagination on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  let ids: string[]
  const TOTAL = 23

  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
    ids = []
    for (let i = 0; i < TOTAL; i++) {
      ids.push((await createContact(t, acme, { first_name: `C${i}`, tags: i % 2 ? ['odd'] : [] })).id)
    }
  })
  afterAll(() => t.close())

  async function page(query: string): Promise<Page> {
    const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?${query}` })
    expect(res.statusCode, res.body).toBe(200)
    return res.json()
  }

  /** Walks to the end; asserts no page is empty unless it is the only one. */
  async function walk(query: string, limit: number, between?: (pageIndex: number) => Promise<void>) {
    const seen: string[] = []
    let after: string | null = null
    let pages = 0
    do {
      const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
      const result = await page(`limit=${limit}${query}${cursor}`)
      expect(result.contacts.length).toBeLessThanOrEqual(limit)
      seen.push(...result.contacts.map((c) => c.id))
      after = result.next_cursor
      pages++
      await between?.(pages)
    } while (after !== null)
    return { seen, pages }
  }

  it.each([1, 2, 5, 22, 23, 24, 50, 100])(
    'limit=%i sees every contact once, in creation order; null cursor exactly at the end',
    async (limit) => {
      const { seen, pages } = await walk('', limit)
      expect(seen).toEqual(ids)
      expect(pages).toBe(Math.max(1, Math.ceil(TOTAL / limit)))
    },
  )

  it('the default page size is 50 and the order can be reversed', async () => {
    expect((await page('')).contacts).toHaveLength(TOTAL)
    const { seen } = await walk('&order=desc', 4)
    expect(seen).toEqual([...ids].reverse())
  })

  it('filters page the same way', async () => {
    const { seen } = await walk('&tag=odd', 3)
    expect(seen).toEqual(ids.filter((_, i) => i % 2 === 1))
  })

  it('the events list pages the same way: every change once, oldest first', async () => {
    const seen: string[] = []
    let after: string | null = null
    do {
      const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/events?limit=7&type=contact.created${cursor}` })
      expect(res.statusCode, res.body).toBe(200)
      const result = res.json() as {
        events: Array<{ id: string; data: { object: { id: string } } }>
        next_cursor: string | null
      }
      seen.push(...result.events.map((e) => e.data.object.id))
      // The feed's cursor never ends: its end is its first page short of the limit.
      after = result.events.length < 7 ? null : result.next_cursor
    } while (after !== null)
    expect(seen).toEqual(ids)
  })

  it('a page of multi-byte text arrives whole: every byte counted, the cursor after it intact', async () => {
    const local = await t.createAccount('Unicode')
    const names = ['Zoë', 'Łukasz Żółć', '山田 太郎', 'Ω 😀 𝄞', 'plain']
    for (const first_name of names) {
      await createContact(t, local, { first_name, tags: ['ünïcode'] })
    }
    const res = await t.inject(local, { method: 'GET', url: '/api/v1/contacts?limit=4&tag=%C3%BCn%C3%AFcode' })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.headers['content-length']).toBe(String(res.rawPayload.length))
    const first = res.json() as { contacts: Array<{ first_name: string }>; next_cursor: string | null }
    expect(first.contacts.map((c) => c.first_name)).toEqual(names.slice(0, 4))
    const next = await t.inject(local, {
      method: 'GET',
      url: `/api/v1/contacts?limit=4&tag=%C3%BCn%C3%AFcode&after=${encodeURIComponent(first.next_cursor ?? '')}`,
    })
    expect((next.json() as { contacts: Array<{ first_name: string }> }).contacts.map((c) => c.first_name)).toEqual([
      'plain',
    ])
  })

  it('a page is byte for byte the JSON serialization of its contacts and cursor', async () => {
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=5' })
    const parsed = res.json() as Page
    const contacts = []
    for (const { id } of parsed.contacts) {
      contacts.push((await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${id}` })).json())
    }
    expect(contacts).toHaveLength(5)
    const expected = Buffer.from(JSON.stringify({ contacts, next_cursor: parsed.next_cursor }))
    expect(res.rawPayload.equals(expected), res.body).toBe(true)
    expect(res.headers['content-length']).toBe(String(expected.length))
  })

  it('limit may change between pages', async () => {
    const first = await page('limit=3')
    const second = await page(`limit=10&after=${encodeURIComponent(first.next_cursor ?? '')}`)
    expect([...first.contacts, ...second.contacts].map((c) => c.id)).toEqual(ids.slice(0, 13))
  })

  it('a walk during creates and deletes has no duplicates and misses none that existed throughout', async () => {
    const local = await t.createAccount('Churn')
    const initial: string[] = []
    for (let i = 0; i < 30; i++) {
      initial.push((await createContact(t, local, { first_name: `I${i}` })).id)
    }
    const deleted = new Set<string>()
    const created: string[] = []
    const seen: string[] = []
    let after: string | null = null
    let round = 0
    do {
      const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
      const res = await t.inject(local, { method: 'GET', url: `/api/v1/contacts?limit=4${cursor}` })
      const result = res.json() as Page
      seen.push(...result.contacts.map((c) => c.id))
      after = result.next_cursor
      // Delete one not yet seen, one already seen (even the cursor's own row), and create one.
      const ahead = initial.find((id) => !seen.includes(id) && !deleted.has(id))
      const last = result.contacts.at(-1)?.id
      for (const id of [ahead, round % 2 ? last : undefined]) {
        if (id && !deleted.has(id)) {
          expect((await t.inject(local, { method: 'DELETE', url: `/api/v1/contacts/${id}` })).statusCode).toBe(204)
          deleted.add(id)
        }
      }
      created.push((await createContact(t, local, { first_name: `N${round}` })).id)
      round++
    } while (after !== null && round < 100)
    expect(new Set(seen).size).toBe(seen.length)
    const throughout = initial.filter((id) => !deleted.has(id))
    expect(throughout.every((id) => seen.includes(id))).toBe(true)
    // Ascending order sees contacts created during the walk too.
    expect(created.slice(0, -1).every((id) => seen.includes(id))).toBe(true)
  })

  it('the sort key is unique: contacts with identical created_at page without skips or repeats', async () => {
    const frozen = await createTestHarness({ dialect, clock: manualClock() })
    try {
      const local = await frozen.createAccount('Burst')
      const created = []
      for (let i = 0; i < 12; i++) {
        created.push(await createContact(frozen, local, { first_name: `B${i}` }))
      }
      expect(new Set(created.map((c) => c.created_at)).size).toBe(1)
      const seen: string[] = []
      let after: string | null = null
      do {
        const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
        const result = (
          await frozen.inject(local, { method: 'GET', url: `/api/v1/contacts?limit=1${cursor}` })
        ).json() as Page
        seen.push(...result.contacts.map((c) => c.id))
        after = result.next_cursor
      } while (after !== null)
      expect(seen).toEqual(created.map((c) => c.id))
    } finally {
      await frozen.close()
    }
  })

  it.each(['0', '-1', '101', '1e9', 'abc', '1.5', '', '10&limit=20'])(
    'limit=%s → 400 invalid_parameter naming limit',
    async (limit) => {
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?limit=${limit}` })
      const body = expectProblem(res, 400, 'invalid_parameter')
      expect(body.errors[0].field).toBe('limit')
    },
  )

  it.each(['1e2', '0x10', '+5', ' 5', '5 ', '1.0', '05.', '1_0'])(
    'limit=%s (not plain decimal digits) → 400 invalid_parameter naming limit',
    async (limit) => {
      const res = await t.inject(acme, {
        method: 'GET',
        url: `/api/v1/contacts?limit=${encodeURIComponent(limit)}`,
      })
      const body = expectProblem(res, 400, 'invalid_parameter')
      expect(body.errors[0]).toEqual({
        field: 'limit',
        message: 'must be an integer from 1 to 100',
      })
      const events = await t.inject(acme, { method: 'GET', url: `/api/v1/events?limit=${encodeURIComponent(limit)}` })
      expect(expectProblem(events, 400, 'invalid_parameter').errors[0].field).toBe('limit')
    },
  )

  it('limit=007 is 7 (decimal digits, leading zeros and all)', async () => {
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=007' })
    expect(res.statusCode).toBe(200)
  })

  it('a bad limit gets the documented message', async () => {
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=101' })
    expect(res.json().detail).toBe('limit must be an integer from 1 to 100')
  })

  /**
   * A cursor built from its definition with Node's own HMAC: base64url JSON (the filters as 16
   * bytes of SHA-256 of their canonical form), a dot, HMAC-SHA-256 truncated to 16 bytes.
   */
  const cursorSignedAsBefore = (secret: string, accountId: string, lastId: string) => {
    const filters = createHash('sha256').update('[["order","asc"]]').digest().subarray(0, 16).toString('base64url')
    const payload = { v: 2, l: 'contacts', a: accountId, f: filters, k: lastId }
    const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url')
    const signature = createHmac('sha256', secret).update(`cursor.${encoded}`).digest().subarray(0, 16)
    return `${encoded}.${signature.toString('base64url')}`
  }

  it('a cursor built from its definition pages, and cursors issued are exactly those bytes', async () => {
    const cursor = cursorSignedAsBefore(TEST_SECRET, acme.id, ids[1] as string)
    const next = await page(`limit=3&after=${encodeURIComponent(cursor)}`)
    expect(next.contacts.map((c) => c.id)).toEqual(ids.slice(2, 5))
    expect((await page('limit=2')).next_cursor).toBe(cursor)
  })

  it('rejects every cursor it did not issue for this query: 400 invalid_cursor', async () => {
    const first = await page('limit=2')
    const good = first.next_cursor as string
    const [payload, signature] = good.split('.') as [string, string]
    const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString())
    const forged = Buffer.from(JSON.stringify({ ...decoded, k: ids[20] })).toString('base64url')
    const eventsPage = await t.inject(acme, { method: 'GET', url: '/api/v1/events?limit=1' })
    const eventsCursor = eventsPage.json().next_cursor as string
    const cases: Array<[string, string, string]> = [
      ['garbage', 'garbage', ''],
      ['empty signature', `${payload}.`, ''],
      ['tampered position', `${forged}.${signature}`, ''],
      ['truncated signature', `${payload}.${signature.slice(0, -2)}`, ''],
      ['extra part', `${good}.x`, ''],
      ['too long', 'a'.repeat(2000), ''],
      ['empty', '', ''],
      // Its first character + 256: the same low byte, so a signer reading text as bytes would accept it.
      [
        'non-ASCII look-alike',
        `${String.fromCharCode(payload.charCodeAt(0) + 256)}${payload.slice(1)}.${signature}`,
        '',
      ],
      ['padded signature', `${payload}.${signature}==`, ''],
      // The signature's last character with its padding bits flipped: the same bytes, another spelling.
      ['non-canonical signature', `${payload}.${withPaddingBitFlipped(signature)}`, ''],
      ['another query (filter added)', good, '&tag=odd'],
      ['another query (order changed)', good, '&order=desc'],
      ['another list', eventsCursor, ''],
    ]
    for (const [name, cursor, extra] of cases) {
      const res = await t.inject(acme, {
        method: 'GET',
        url: `/api/v1/contacts?limit=2&after=${encodeURIComponent(cursor)}${extra}`,
      })
      expect(expectProblem(res, 400, 'invalid_cursor').errors[0].field, name).toBe('after')
    }
  })

  it('a walk with long non-ASCII filters: every cursor is short and works (it carries a digest of the filters)', async () => {
    const q = '語'.repeat(255)
    for (let i = 0; i < 3; i++) {
      await createContact(t, acme, { first_name: `${q}${i}` })
    }
    const seen: string[] = []
    let after = ''
    for (;;) {
      const res = await t.inject(acme, {
        method: 'GET',
        url: `/api/v1/contacts?limit=1&q=${encodeURIComponent(q)}${after ? `&after=${encodeURIComponent(after)}` : ''}`,
      })
      expect(res.statusCode, res.body).toBe(200)
      seen.push(...res.json().contacts.map((c: { first_name: string }) => c.first_name.slice(-1)))
      after = res.json().next_cursor
      if (after === null) {
        break
      }
      expect(after.length).toBeLessThan(200)
    }
    expect(seen).toEqual(['0', '1', '2'])
  })
})

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/** 16 bytes in base64url: 22 characters, the last carrying 2 bits and 4 bits that decoders ignore. */
function withPaddingBitFlipped(text: string): string {
  const last = BASE64URL.indexOf(text.at(-1) ?? 'A')
  const flipped = `${text.slice(0, -1)}${BASE64URL[last ^ 1]}`
  if (Buffer.from(flipped, 'base64url').compare(Buffer.from(text, 'base64url')) !== 0) {
    throw new Error('the flipped bit was not a padding bit')
  }
  return flipped
}
