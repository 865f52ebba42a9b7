// Finished CSV import jobs are purged EVENT_RETENTION_DAYS after they finish, like events and
// deliveries (src/db/retention.ts); an unfinished job is never purged, however old.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp } from '../../test/web-client.js'
import { newId } from '../lib/ids.js'
import { insertImport, purgeFinishedImports } from './imports.store.js'

const DAY = 86_400_000

describe.each(testDialects())('import retention on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  it("a finished job's page is gone once its retention passed; an unfinished job's stays", async () => {
    const { client, accountId } = await signUp(t.app, 'retention@example.com')
    const uploaded = await client.uploadCsv(accountId, 'email\nada@example.com\n')
    expect(uploaded.statusCode, uploaded.body).toBe(303)
    const finished = String(uploaded.headers.location)
    await t.deps.imports.drain()
    expect((await client.get(finished)).body).toContain('Import finished')
    // A job queued long ago and never run (the runner is not woken): no finished_at.
    const stuck = newId('contactImport')
    await insertImport(t.db, accountId, {
      id: stuck,
      fileName: 'b.csv',
      now: new Date(Date.now() - 90 * DAY).toISOString(),
    })
    const unfinished = `/app/${accountId}/contacts/imports/${stuck}`
    expect((await client.get(unfinished)).statusCode).toBe(200)

    // Within the retention nothing goes; past it, the finished job does.
    expect(await purgeFinishedImports(t.db, new Date(Date.now() + 29 * DAY), 30)).toBe(0)
    expect((await client.get(finished)).statusCode).toBe(200)
    expect(await purgeFinishedImports(t.db, new Date(Date.now() + 31 * DAY), 30)).toBe(1)
    expect((await client.get(finished)).statusCode).toBe(404)
    expect((await client.get(unfinished)).statusCode).toBe(200)
  })
})
