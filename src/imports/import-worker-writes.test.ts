// On an SQLite file the CSV import's worker thread writes the rows on a connection of its own
// (import-job.ts): the serving connection does not, and its own write transactions meanwhile, which
// read before they write, all succeed (they begin IMMEDIATE and wait for the worker's commit). The
// same thread reads the CSV export's pages (contacts.csv-export.ts).
import { CompiledQuery } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp } from '../../test/web-client.js'
import { exportContactsCsv, readExportPage } from '../contacts/contacts.csv-export.js'

const ROWS = 3000
const csv = (prefix: string) =>
  ['email,first_name,tags', ...Array.from({ length: ROWS }, (_, i) => `${prefix}-${i}@example.com,Row ${i},bulk`)].join(
    '\n',
  )

describe.skipIf(!testDialects().includes('sqlite'))('CSV import on an SQLite file', () => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', sqliteFile: true })
  })
  afterAll(() => t.close())

  /** Rows inserted, updated or deleted by the serving connection since it opened (SQLite's count). */
  const servingChanges = async () =>
    Number(
      (await t.db.executeQuery<{ n: number }>(CompiledQuery.raw('select total_changes() as n', []))).rows[0]?.n ?? -1,
    )

  it('writes the rows on the worker thread: the serving connection changes no contact', async () => {
    const { client, accountId } = await signUp(t.app, 'worker-writes@example.com')
    const before = await servingChanges()
    expect((await client.uploadCsv(accountId, csv('w'))).statusCode).toBe(303)
    await t.deps.imports.drain()

    const job = await t.db
      .selectFrom('contact_imports')
      .selectAll()
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    expect(job).toMatchObject({ state: 'done', rows_written: ROWS, created: ROWS })
    const contacts = await t.db
      .selectFrom('contacts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    expect(Number(contacts?.n)).toBe(ROWS)
    const events = await t.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    expect(Number(events?.n)).toBe(ROWS)
    // The upload's part, the job's row and its progress: a few dozen changes, where the contacts,
    // their tags, terms and events written here would be over 4 a row.
    const changed = (await servingChanges()) - before
    expect(changed).toBeGreaterThan(0)
    expect(changed).toBeLessThan(100)
  })

  it("another tenant's writes while the worker writes all succeed", async () => {
    const { client, accountId } = await signUp(t.app, 'worker-busy@example.com')
    const b = await t.createAccount('Busy B')
    const ids: string[] = []
    for (let i = 0; i < 8; i++) {
      const created = await t.inject(b, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: `b-${i}@example.com`, first_name: 'B' },
      })
      expect(created.statusCode).toBe(201)
      ids.push((created.json() as { id: string }).id)
    }

    expect((await client.uploadCsv(accountId, csv('busy'))).statusCode).toBe(303)
    let importing = true
    const importDone = t.deps.imports.drain().finally(() => {
      importing = false
    })
    // Both sides' transactions read before they write: under a deferred BEGIN, the other side's
    // commit in between fails the write with SQLITE_BUSY at once, whatever the busy timeout.
    const statuses = new Map<number, number>()
    const deadline = Date.now() + 15_000
    let writes = 0
    await Promise.all(
      ids.map(async (id, lane) => {
        for (let round = 0; (importing && Date.now() < deadline) || round < 3; round++) {
          const res = await t.inject(b, {
            method: 'PATCH',
            url: `/api/v1/contacts/${id}`,
            payload: { first_name: `B ${lane}.${round}` },
          })
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
          writes++
        }
      }),
    )
    // The import ended while B wrote: under a deferred BEGIN the worker's slices, which also read
    // first, failed on B's commits and the job went round in retries until B stopped.
    expect(importing).toBe(false)
    expect(Object.fromEntries(statuses)).toEqual({ 200: writes })
    await importDone
    const job = await t.db
      .selectFrom('contact_imports')
      .selectAll()
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    expect(job).toMatchObject({ state: 'done', rows_written: ROWS })
  })
})

describe.skipIf(!testDialects().includes('sqlite'))('CSV export on an SQLite file', () => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', sqliteFile: true })
  })
  afterAll(() => t.close())

  it("is read on the worker thread, in pages of 500, byte for byte the serving connection's export", async () => {
    const { client, accountId } = await signUp(t.app, 'worker-export@example.com')
    const a = { id: accountId, name: 'A', key: '', keyId: '' }
    const key = await t.createKey(a)
    // 1,201 contacts: two full pages of the worker's, one partial; values that need quoting.
    for (let i = 0; i < 1201; i += 100) {
      const res = await t.inject(
        { ...a, key },
        {
          method: 'POST',
          url: '/api/v1/contacts/batch',
          payload: {
            operations: Array.from({ length: Math.min(100, 1201 - i) }, (_, j) => ({
              op: 'create',
              contact: { email: `e-${i + j}@example.com`, first_name: `Line, "${i + j}"\nnext`, tags: ['x', 'y'] },
            })),
          },
        },
      )
      expect(res.statusCode, res.body).toBeLessThan(300)
    }
    expect(t.deps.imports.csvWorker.threadId).toBeUndefined()

    const res = await client.get(`/app/${accountId}/contacts/export.csv`)
    expect(res.statusCode).toBe(200)
    expect(t.deps.imports.csvWorker.threadId).toBeDefined()
    let here = ''
    for await (const chunk of exportContactsCsv((after) => readExportPage(t.db, accountId, after))) {
      here += chunk
    }
    expect(res.body).toBe(here)
    expect(res.body.split('\r\n').length).toBe(1 + 1201 + 1)
  })
})
