// On PostgreSQL every statement is a round trip, so an import's speed is its statements per row:
// new contacts are written together (contacts, tags, terms in one statement each, the count once),
// leaving about one statement per row (its event). Counted at the drivers' query methods.
import { PGlite } from '@electric-sql/pglite'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { multipart, signUp } from '../../test/web-client.js'

const ROWS = 200

/** Counts the statements sent through node-postgres and PGlite while installed. */
function countStatements() {
  type Query = (this: unknown, ...args: unknown[]) => unknown
  const protos = [pg.Client.prototype, PGlite.prototype] as unknown as Array<{ query: Query }>
  const originals = protos.map((proto) => proto.query)
  const counter = {
    n: 0,
    restore: () => {
      protos.forEach((proto, i) => {
        proto.query = originals[i] as Query
      })
    },
  }
  protos.forEach((proto, i) => {
    const original = originals[i] as Query
    proto.query = function (this: unknown, ...args: unknown[]) {
      counter.n++
      return original.apply(this, args)
    }
  })
  return counter
}

// Statements are counted on PostgreSQL's drivers only; a SQLite-only run (TEST_DIALECTS=sqlite)
// reports this file as skipped rather than as a file without a suite.
const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')
describe.skipIf(postgresDialects.length === 0)('import statements (PGlite and PostgreSQL only)', () => {
  it.skip('needs PGlite or PostgreSQL in TEST_DIALECTS', () => {})
})

describe.each(postgresDialects)('import statements on %s', (dialect) => {
  let t: TestHarness
  let counter: ReturnType<typeof countStatements>
  beforeAll(async () => {
    // Installed first: each new connection binds its query method when it opens (src/db/database.ts).
    counter = countStatements()
    t = await createTestHarness({ dialect })
  })
  afterAll(async () => {
    counter.restore()
    await t.close()
  })

  it(`a ${ROWS}-row import of new contacts sends under two statements a row`, async () => {
    const { client, accountId } = await signUp(t.app, 'statements@example.com')
    await client.get(`/app/${accountId}/contacts/import`)
    const csv = ['email,first_name,tags', ...Array.from({ length: ROWS }, (_, i) => `r${i}@example.com,R ${i},a;b`)]
    const started = counter.n
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
    const sent = counter.n - started
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
