// On an SQLite file the CSV import's worker thread writes the rows on a connection of its own
// (import-job.ts): the serving connection does not, and its own write transactions meanwhile, which
// read before they write, all succeed (they begin IMMEDIATE and wait for the worker's commit). The
// same thread reads the CSV export's pages (contacts.csv-export.ts).
import { CompiledQuery } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp, type WebClient } from '../../test/web-client.js'
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
    for (let i = 0; i < 4; i++) {
      const created = await t.inject(b, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: `b-${i}@example.com`, first_name: 'B' },
      })
      expect(created.statusCode).toBe(201)
      ids.push((created.json() as { id: string }).id)
    }

    // What the runner reports (a serving process logs it): a slice the worker failed to write.
    const reports: unknown[] = []
    t.deps.imports.start((error) => reports.push(error))
    expect((await client.uploadCsv(accountId, csv('busy'))).statusCode).toBe(303)
    let importing = true
    const importDone = t.deps.imports.drain().finally(() => {
      importing = false
    })
    // Both sides' transactions read before they write: under a deferred BEGIN, the other side's
    // commit in between fails the write with SQLITE_BUSY at once, whatever the busy timeout.
    const statuses = new Map<number, number>()
    const deadline = Date.now() + 40_000
    let writes = 0
    await Promise.all(
      ids.map(async (id, lane) => {
        for (let round = 0; (importing && reports.length === 0 && Date.now() < deadline) || round < 3; round++) {
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
    // Under a deferred BEGIN the worker's slices, which also read first, failed on B's commits
    // (reported, and the job went round in retries until B stopped).
    expect(reports.map(String)).toEqual([])
    expect(importing).toBe(false)
    expect(Object.fromEntries(statuses)).toEqual({ 200: writes })
    await importDone
    const job = await t.db
      .selectFrom('contact_imports')
      .selectAll()
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    expect(job).toMatchObject({ state: 'done', rows_written: ROWS })
  }, 60_000)

  it('a stop mid-write leaves the job to resume: written up to a slice, its lease released (last: the runner stays stopped)', async () => {
    const { client, accountId } = await signUp(t.app, 'worker-stop@example.com')
    expect((await client.uploadCsv(accountId, csv('stop'))).statusCode).toBe(303)
    const job = () =>
      t.db.selectFrom('contact_imports').selectAll().where('account_id', '=', accountId).executeTakeFirstOrThrow()
    const deadline = Date.now() + 30_000
    while ((await job()).rows_written === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await t.deps.imports.stop()
    const stopped = await job()
    expect(stopped.state).toBe('writing')
    expect(stopped.rows_written).toBeGreaterThan(0)
    expect(stopped.rows_written).toBeLessThan(ROWS)
    // Released, and nothing written after it: the job waits for the slice in the worker before it
    // lets go of the lease (a slice committed after the release would set the lease 15 s ahead).
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(await job()).toMatchObject({ lease_expires_at: null, rows_written: stopped.rows_written })
  })
})

describe.skipIf(!testDialects().includes('sqlite'))('CSV export on an SQLite file', () => {
  const CONTACTS = 1000
  let t: TestHarness
  let client: WebClient
  let accountId: string
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', sqliteFile: true })
  })
  afterAll(() => t.close())

  it("is read on the worker thread, byte for byte the serving connection's export", async () => {
    ;({ client, accountId } = await signUp(t.app, 'worker-export@example.com'))
    const a = { id: accountId, name: 'A', key: '', keyId: '' }
    const key = await t.createKey(a)
    // Two full pages of the worker's (500), then the empty one that ends it; values that need quoting.
    for (let i = 0; i < CONTACTS; i += 100) {
      const res = await t.inject(
        { ...a, key },
        {
          method: 'POST',
          url: '/api/v1/contacts/batch',
          payload: {
            operations: Array.from({ length: 100 }, (_, j) => ({
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
    expect(res.body.split('\r\n').length).toBe(1 + CONTACTS + 1)
  })

  it('streams on when the process is told to stop meanwhile (last: the runner stays stopped)', async () => {
    // What a SIGTERM does (server.ts): the import runner stops while requests in flight finish.
    const exporting = client.get(`/app/${accountId}/contacts/export.csv`)
    await t.deps.imports.stop()
    const res = await exporting
    expect(res.statusCode).toBe(200)
    expect(res.body.split('\r\n').length).toBe(1 + CONTACTS + 1)
  })
})
