// On PostgreSQL every statement is a round trip, so an import's speed is its statements per row:
// new contacts are written together (contacts, tags, terms in one statement each, the count once),
// leaving about one statement per row (its event). Counted at the drivers' query methods.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { captureStatements, type StatementCapture } from '../../test/statement-capture.js'
import { multipart, signUp } from '../../test/web-client.js'

const ROWS = 200

// Statements are counted on PostgreSQL's drivers only; a SQLite-only run (TEST_DIALECTS=sqlite)
// reports this file as skipped rather than as a file without a suite.
const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')
describe.skipIf(postgresDialects.length === 0)('import statements (PGlite and PostgreSQL only)', () => {
  it.skip('needs PGlite or PostgreSQL in TEST_DIALECTS', () => {})
})

describe.each(postgresDialects)('import statements on %s', (dialect) => {
  let t: TestHarness
  let capture: StatementCapture
  beforeAll(async () => {
    // Installed first: each new connection binds its query method when it opens (src/db/database.ts).
    capture = captureStatements()
    t = await createTestHarness({ dialect })
  })
  afterAll(async () => {
    capture.restore()
    await t.close()
  })

  it(`a ${ROWS}-row import of new contacts sends under two statements a row`, async () => {
    const { client, accountId } = await signUp(t.app, 'statements@example.com')
    await client.get(`/app/${accountId}/contacts/import`)
    const csv = ['email,first_name,tags', ...Array.from({ length: ROWS }, (_, i) => `r${i}@example.com,R ${i},a;b`)]
    capture.take()
    const uploaded = await t.app.inject({
      method: 'POST',
      url: `/app/${accountId}/contacts/import`,
      cookies: { sid: client.cookies.get('sid') ?? '' },
      ...multipart([
        { name: '_csrf', value: client.csrf() },
        { name: 'file', filename: 'a.csv', content: csv.join('\n') },
      ]),
    })
    expect(uploaded.statusCode, uploaded.body).toBe(303)
    await t.deps.imports.drain()
    const sent = capture.take().length
    const page = await client.get(String(uploaded.headers.location))
    expect(page.body).toContain('Import finished')
    const list = await t.app.inject({
      method: 'GET',
      url: `/app/${accountId}/contacts/export.csv`,
      cookies: { sid: client.cookies.get('sid') ?? '' },
    })
    expect(list.body.trim().split('\n')).toHaveLength(ROWS + 1)
    expect(sent / ROWS).toBeLessThan(2)
  })
})
