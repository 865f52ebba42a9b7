// A list page asked for without conditions reads its rows and the account's contacts version in one
// statement (contacts.list-version.ts): counted at the drivers on PGlite and PostgreSQL, and on
// PostgreSQL the version it reads still names a transaction left open below the newest position.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, listVersionSettled } from '../../test/helpers.js'
import { captureStatements, type StatementCapture } from '../../test/statement-capture.js'
import { inTransaction } from '../db/transaction.js'
import { createContact as storeContact } from './contacts.store.js'

// Statements are counted on PostgreSQL's drivers only; a SQLite-only run (TEST_DIALECTS=sqlite)
// reports this file as skipped rather than as a file without a suite.
const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')
describe.skipIf(postgresDialects.length === 0)('list page statements (PGlite and PostgreSQL only)', () => {
  it.skip('needs PGlite or PostgreSQL in TEST_DIALECTS', () => {})
})

describe.each(postgresDialects)('list page statements on %s', (dialect) => {
  let t: TestHarness
  let capture: StatementCapture
  let acme: TestAccount
  beforeAll(async () => {
    // Installed first: each new connection binds its query method when it opens (src/db/database.ts).
    capture = captureStatements()
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
    for (const email of ['ada@x.io', 'bob@x.io', 'cy@x.io']) {
      await createContact(t, acme, { email })
    }
    await listVersionSettled(t, acme)
  })
  afterAll(async () => {
    capture.restore()
    await t.close()
  })

  /** The statements a request sent, the API key's own bookkeeping left out. */
  const statementsOf = async (url: string, headers: Record<string, string> = {}) => {
    capture.take()
    const res = await t.inject(acme, { method: 'GET', url, headers })
    return { res, statements: capture.take().filter((text) => !/api_keys/.test(text)) }
  }

  it('a page without conditions is one statement, and its ETag is the one a poller gets 304 with', async () => {
    for (const url of ['/api/v1/contacts?limit=2', '/api/v1/contacts?limit=2&order=desc', '/api/v1/contacts?tag=x']) {
      const { res, statements } = await statementsOf(url)
      expect(res.statusCode, res.body).toBe(200)
      expect(statements, url).toHaveLength(1)
      expect(statements[0]).toMatch(/union all select null/)
      // The version row is not a contact: the page is the contacts alone, in order.
      const ids = (res.json().contacts as Array<{ id: string }>).map((contact) => contact.id)
      expect(ids.every((id) => id.startsWith('con_'))).toBe(true)
      const tag = res.headers.etag as string
      // The poller's request reads the version alone (one statement) and answers 304.
      const polled = await statementsOf(url, { 'if-none-match': tag })
      expect(polled.res.statusCode, url).toBe(304)
      expect(polled.statements, url).toHaveLength(1)
      expect(polled.statements[0]).not.toMatch(/contacts/)
    }
    const page = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=2' })).json()
    const desc = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=3&order=desc' })).json()
    expect(page.contacts.map((c: { email: string }) => c.email)).toEqual(['ada@x.io', 'bob@x.io'])
    expect(desc.contacts.map((c: { email: string }) => c.email)).toEqual(['cy@x.io', 'bob@x.io', 'ada@x.io'])
  })

  it.runIf(dialect === 'postgres')(
    'a change left open below the newest position gives the page another tag once it commits',
    async () => {
      let release: () => void = () => {}
      const held = new Promise<void>((resolve) => {
        release = resolve
      })
      let written: () => void = () => {}
      const wrote = new Promise<void>((resolve) => {
        written = resolve
      })
      // An older transaction writes a contact (and its event) and stays open...
      const open = inTransaction(t.db, async (trx) => {
        await storeContact(trx, acme.id, { email: 'slow@x.io' }, new Date().toISOString())
        written()
        await held
      })
      await wrote
      // ...while a newer one commits: the newest position is now above the open one.
      await createContact(t, acme, { email: 'fast@x.io' })
      const before = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
      const tag = before.headers.etag as string
      expect(before.json().contacts.map((c: { email: string }) => c.email)).not.toContain('slow@x.io')
      release()
      await open
      const after = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
      expect(after.json().contacts.map((c: { email: string }) => c.email)).toContain('slow@x.io')
      expect(after.headers.etag).not.toBe(tag)
      expect(
        (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts', headers: { 'if-none-match': tag } }))
          .statusCode,
      ).toBe(200)
    },
  )
})
