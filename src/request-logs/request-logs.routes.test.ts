// The request log through the API, on every dialect: what an entry says, the filters and paging,
// the mode and account walls, the daily cap, the bounded scan and the retention purge.
import { sql } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { expectProblem } from '../../test/helpers.js'
import { inTransaction } from '../db/transaction.js'
import { firstIdAt, timeOfId } from '../lib/ids.js'
import type { RequestLog, StoredEntry } from './request-log.js'
import { chunksOf } from './request-log-chunk.js'
import { createRequestLogWriter } from './request-log-writer.js'
import { listRequestLogRows, purgeExpiredRequestLogs, storeRequestLogs } from './request-logs.store.js'

interface Page {
  request_logs: RequestLog[]
  next_cursor: string | null
}

describe.each(testDialects())('request log on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const list = async (account: TestAccount, query = ''): Promise<Page> => {
    const res = await t.inject(account, { method: 'GET', url: `/api/v1/request_logs${query}` })
    expect(res.statusCode, res.body).toBe(200)
    return res.json()
  }

  /** Every entry of a walk with these filters, following next_cursor to its end. */
  const walk = async (account: TestAccount, query: string): Promise<RequestLog[]> => {
    const seen: RequestLog[] = []
    let after = ''
    for (;;) {
      const page = await list(account, `?${query}${after}`)
      seen.push(...page.request_logs)
      if (page.next_cursor === null) {
        return seen
      }
      after = `&after=${encodeURIComponent(page.next_cursor)}`
    }
  }

  it('records each request with its route, status, error code and Idempotency-Key, never its query or body', async () => {
    const me = await t.inject(acme, { method: 'GET', url: '/api/v1/me', headers: { 'user-agent': 'probe/1.0' } })
    const post = {
      method: 'POST' as const,
      url: '/api/v1/contacts',
      headers: { 'idempotency-key': 'order-17' },
      payload: { email: 'ada@example.com' },
    }
    const created = await t.inject(acme, post)
    const replayed = await t.inject(acme, post)
    expect(replayed.headers['idempotent-replayed']).toBe('true')
    const missing = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts/con_01JZZZZZZZZZZZZZZZZZZZZZZZ' })
    await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?q=ada%40example.com' })

    const { request_logs: entries } = await list(acme)
    expect(entries.map((e) => [e.method, e.route, e.status])).toEqual([
      ['GET', '/api/v1/contacts', 200],
      ['GET', '/api/v1/contacts/{id}', 404],
      ['POST', '/api/v1/contacts', 201],
      ['POST', '/api/v1/contacts', 201],
      ['GET', '/api/v1/me', 200],
    ])
    const [search, notFound, replay, first, meEntry] = entries
    expect(search?.path).toBe('/api/v1/contacts')
    expect(notFound).toMatchObject({
      object: 'request_log',
      id: missing.headers['request-id'],
      livemode: true,
      key_id: acme.keyId,
      path: '/api/v1/contacts/con_01JZZZZZZZZZZZZZZZZZZZZZZZ',
      error_code: 'not_found',
      ip: '127.0.0.1',
      idempotency_key: null,
      idempotent_replayed: false,
    })
    expect(first).toMatchObject({
      id: created.headers['request-id'],
      idempotency_key: 'order-17',
      idempotent_replayed: false,
    })
    expect(replay).toMatchObject({
      id: replayed.headers['request-id'],
      idempotency_key: 'order-17',
      idempotent_replayed: true,
    })
    expect(meEntry).toMatchObject({ id: me.headers['request-id'], user_agent: 'probe/1.0', error_code: null })
    expect(meEntry?.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(meEntry?.duration_ms).toBeGreaterThanOrEqual(0)
    // Neither the key nor any body was kept.
    expect(JSON.stringify(entries)).not.toContain(acme.key)
    expect(JSON.stringify(entries)).not.toContain('ada@example.com')

    const one = await t.inject(acme, { method: 'GET', url: `/api/v1/request_logs/${missing.headers['request-id']}` })
    expect(one.statusCode).toBe(200)
    expect(one.json()).toEqual(notFound)
  })

  it('redacts a key a client put in the path, its user agent or its Idempotency-Key', async () => {
    const other = await t.createKey(acme)
    await t.inject(acme, {
      method: 'GET',
      url: `/api/v1/contacts/${acme.key}`,
      headers: { 'user-agent': `bot ${other}` },
    })
    await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      headers: { 'idempotency-key': other },
      payload: { email: 'k@example.com' },
    })
    const logged = JSON.stringify((await list(acme)).request_logs)
    expect(logged).not.toContain(acme.key)
    expect(logged).not.toContain(other)
    expect(logged).toContain('/api/v1/contacts/[REDACTED]')
    expect(logged).toContain('"user_agent":"bot [REDACTED]"')
  })

  it('keeps each account and each mode to its own log', async () => {
    const bob = await t.createAccount('Bob')
    const bobsRequest = await t.inject(bob, { method: 'GET', url: '/api/v1/me' })
    const acmeTest = await t.testMode(acme)
    const testRequest = await t.inject(acmeTest, { method: 'GET', url: '/api/v1/me' })
    await t.inject(acme, { method: 'GET', url: '/api/v1/me' })

    const live = await list(acme)
    expect(live.request_logs).toHaveLength(1)
    expect(live.request_logs.every((e) => e.livemode)).toBe(true)
    const test = await list(acmeTest)
    expect(test.request_logs.map((e) => e.id)).toEqual([testRequest.headers['request-id']])
    expect(test.request_logs[0]?.livemode).toBe(false)
    for (const [account, id] of [
      [acme, bobsRequest.headers['request-id']],
      [acme, testRequest.headers['request-id']],
      [acme, 'req_01JZZZZZZZZZZZZZZZZZZZZZZZ'],
      [acme, 'nonsense'],
    ] as const) {
      expectProblem(await t.inject(account, { method: 'GET', url: `/api/v1/request_logs/${id}` }), 404, 'not_found')
    }
  })

  it('records refusals too: a 429, a 403 and a 400, with their codes', async () => {
    await t.close()
    t = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '3' } })
    acme = await t.createAccount()
    const readOnly: TestAccount = { ...acme, key: await t.createKey(acme, { scopes: ['read'] }) }
    expectProblem(
      await t.inject(readOnly, { method: 'POST', url: '/api/v1/contacts', payload: {} }),
      403,
      'insufficient_scope',
    )
    expectProblem(await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=0' }), 400, 'invalid_parameter')
    for (let i = 0; i < 3; i++) {
      await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    }
    // Read from storage: this account's rate limit is spent.
    await t.deps.requestLog.flush()
    const { rows: page } = await listRequestLogRows(t.db, acme.id, { afterId: undefined, fetch: 100 })
    const rows = page.map((row) => JSON.parse(row.body) as RequestLog).reverse()
    expect(rows.map((r) => [r.status, r.error_code])).toEqual([
      [403, 'insufficient_scope'],
      [400, 'invalid_parameter'],
      [200, null],
      [429, 'rate_limited'],
      [429, 'rate_limited'],
    ])
    expect(rows[0]?.key_id).not.toBe(acme.keyId)
  })

  it('filters by status, class, method, path prefix, key and time, and pages each entry once', async () => {
    const other: TestAccount = { ...acme, key: await t.createKey(acme) }
    for (let i = 0; i < 3; i++) {
      await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: `p${i}@example.com` } })
      await t.inject(other, { method: 'GET', url: `/api/v1/contacts/con_${i}` })
    }
    const pause = () => new Promise((resolve) => setTimeout(resolve, 3))
    await pause()
    const middle = new Date().toISOString()
    await pause()
    await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    await pause()
    // The listing requests below are logged too: every query stops before them.
    const end = new Date().toISOString()
    await pause()

    const entries = async (query: string, before = end) => walk(acme, `limit=2&created_before=${before}&${query}`)
    const statuses = async (query: string, before = end) => (await entries(query, before)).map((e) => e.status)
    expect(await statuses('status=404')).toEqual([404, 404, 404])
    expect(await statuses('status=2xx')).toEqual([200, 201, 201, 201])
    expect(await statuses('method=POST')).toEqual([201, 201, 201])
    expect(await statuses('path=/api/v1/contacts/')).toEqual([404, 404, 404])
    expect(await statuses(`created_after=${middle}`)).toEqual([200])
    expect(await statuses('status=4xx', middle)).toEqual([404, 404, 404])
    const otherKeyId = (await entries('status=404'))[0]?.key_id
    expect(otherKeyId).not.toBe(acme.keyId)
    expect(await statuses(`key_id=${otherKeyId}`)).toEqual([404, 404, 404])
    expect(await statuses('status=500')).toEqual([])
    // Times outside what an id can hold are read as its first or last moment, not as garbage.
    expect(await statuses('created_after=1960-01-01T00:00:00Z&status=404')).toEqual([404, 404, 404])
    expect(await statuses('status=404', '1960-01-01T00:00:00Z')).toEqual([])
    expect(await statuses('status=404', '%2B275000-01-01T00:00:00Z')).toEqual([404, 404, 404])
    // Paged two at a time, each entry came once.
    const all = await entries('')
    expect(new Set(all.map((e) => e.id)).size).toBe(7)

    for (const bad of ['status=6xx', 'status=40', 'status=4XX', 'method=get', 'created_after=yesterday', 'sort=id']) {
      expectProblem(
        await t.inject(acme, { method: 'GET', url: `/api/v1/request_logs?${bad}` }),
        400,
        'invalid_parameter',
      )
    }
    // A cursor belongs to its filters.
    const page = await list(acme, '?limit=1&status=404')
    expectProblem(
      await t.inject(acme, { method: 'GET', url: `/api/v1/request_logs?status=2xx&after=${page.next_cursor}` }),
      400,
      'invalid_cursor',
    )
  })

  it('needs a key with full access, even to read', async () => {
    const readOnly: TestAccount = { ...acme, key: await t.createKey(acme, { scopes: ['read'] }) }
    expectProblem(await t.inject(readOnly, { method: 'GET', url: '/api/v1/request_logs' }), 403, 'insufficient_scope')
  })

  it('a filtered page examines a bounded stretch and ends there with a cursor that goes on', async () => {
    const start = Date.now() - 60_000
    const entries: StoredEntry[] = Array.from({ length: 10_600 }, (_, i) =>
      entryAt(acme.keyId, start + i, i === 0 ? 500 : 200),
    )
    await inTransaction(t.db, (trx) =>
      storeRequestLogs(trx, acme.id, dayOf(entries[0]), chunksOf(entries), entries.length, 1_000_000),
    )
    const first = await list(acme, '?status=500')
    expect(first.request_logs).toEqual([])
    expect(first.next_cursor).not.toBeNull()
    const second = await list(acme, `?status=500&after=${encodeURIComponent(first.next_cursor ?? '')}`)
    expect(second.request_logs.map((e) => e.id)).toEqual([entries[0]?.[0]])
    expect(second.next_cursor).toBeNull()
  })

  it('merges chunks that overlap in time, as two instances write them, newest first and each once', async () => {
    const start = Date.now() - 10_000
    const one = [0, 2, 4].map((i) => entryAt(acme.keyId, start + i, 200))
    const other = [1, 3, 5].map((i) => entryAt(acme.keyId, start + i, 404))
    for (const chunk of [one, other]) {
      await inTransaction(t.db, (trx) =>
        storeRequestLogs(trx, acme.id, dayOf(chunk[0]), chunksOf(chunk), chunk.length, 100),
      )
    }
    const before = new Date(start + 6).toISOString()
    const ids = (await walk(acme, `limit=2&created_before=${before}`)).map((e) => e.id)
    const expected = [...one, ...other]
      .map((e) => e[0])
      .sort()
      .reverse()
    expect(ids).toEqual(expected)
    expect((await walk(acme, `limit=1&status=404&created_before=${before}`)).map((e) => e.id)).toEqual(
      other.map((e) => e[0]).reverse(),
    )
    for (const id of expected) {
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/request_logs/${id}` })
      expect(res.statusCode).toBe(200)
      expect(res.json().created_at).toBe(new Date(timeOfId(id)).toISOString())
    }
  })

  it('stores at most REQUEST_LOG_MAX_PER_DAY a day and counts the rest', async () => {
    await t.close()
    t = await createTestHarness({ dialect, env: { REQUEST_LOG_MAX_PER_DAY: '3' } })
    acme = await t.createAccount()
    for (let i = 0; i < 5; i++) {
      await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
    }
    const page = await list(acme)
    expect(page.request_logs).toHaveLength(3)
    const day = await t.db.selectFrom('request_log_days').selectAll().where('account_id', '=', acme.id).execute()
    expect(day.map((d) => Number(d.received))).toEqual([5])
  })

  it('counts a flush that runs past midnight UTC on each of its days', async () => {
    const writer = createRequestLogWriter({ db: t.db, maxPerDay: 10, count: () => {} })
    const midnight = Date.parse('2026-11-28T00:00:00.000Z')
    for (const ms of [midnight - 2, midnight - 1, midnight, midnight + 1, midnight + 2]) {
      writer.record(acme.id, entryAt(acme.keyId, ms, 200))
    }
    await writer.stop()
    const days = await t.db
      .selectFrom('request_log_days')
      .select(['day', 'received'])
      .where('account_id', '=', acme.id)
      .orderBy('day')
      .execute()
    expect(days.map((d) => [d.day, Number(d.received)])).toEqual([
      ['2026-11-27', 2],
      ['2026-11-28', 3],
    ])
    const stored = await walk(acme, `limit=100&created_before=${new Date(midnight + 3).toISOString()}`)
    expect(stored).toHaveLength(5)
  })

  it.runIf(dialect === 'postgres')('compresses chunks with LZ4 on the PostgreSQL server, which has it', async () => {
    const entries = Array.from({ length: 400 }, (_, i) => entryAt(acme.keyId, Date.now() - 5_000 + i, 200))
    await inTransaction(t.db, (trx) => storeRequestLogs(trx, acme.id, dayOf(entries[0]), chunksOf(entries), 400, 1e6))
    const compressed = await sql<{ method: string }>`
      select pg_column_compression(entries) as method from request_log_chunks
      where account_id = ${acme.id} and length(entries) > 4096`.execute(t.db)
    expect(compressed.rows.map((row) => row.method)).toEqual(['lz4'])
  })

  it('purges entries older than the retention, and the day counts with them', async () => {
    const now = Date.now()
    const old = entryAt(acme.keyId, now - 8 * 86_400_000, 200)
    const recent = entryAt(acme.keyId, now - 6 * 86_400_000, 200)
    for (const entry of [old, recent]) {
      await inTransaction(t.db, (trx) => storeRequestLogs(trx, acme.id, dayOf(entry), chunksOf([entry]), 1, 10))
    }
    expect(await purgeExpiredRequestLogs(t.db, new Date(now), 7, 1)).toBe(1)
    expect((await walk(acme, 'limit=10')).map((e) => e.id)).toEqual([recent[0]])
    const days = await t.db.selectFrom('request_log_days').select('day').where('account_id', '=', acme.id).execute()
    expect(days.map((d) => d.day)).toEqual([dayOf(recent)])
  })
})

function entryAt(keyId: string, ms: number, status: number): StoredEntry {
  // One entry per millisecond: the first id of each is enough (newId never goes back in time).
  const id = firstIdAt('request', ms)
  return [
    id,
    keyId,
    'GET',
    '/api/v1/me',
    '/api/v1/me',
    status,
    1.5,
    status === 500 ? 'internal_error' : null,
    '203.0.113.7',
    null,
    null,
    0,
  ]
}

const dayOf = (entry: StoredEntry | undefined): string =>
  new Date(timeOfId(entry?.[0] ?? '')).toISOString().slice(0, 10)
