// An upload is stored in parts of IMPORT_PART_BYTES, a statement each (docs/design.md#fair-share: no statement
// holds SQLite's synchronous driver for long), read back whole and deleted part by part; parts no
// unfinished job owns are deleted by the account's next upload once they are an hour old.
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp } from '../../test/web-client.js'
import { newId } from '../lib/ids.js'
import { deleteImportFile, IMPORT_PART_BYTES, insertImport, readImportFile, writeImportFile } from './imports.store.js'

const HOUR = 3_600_000
let accounts = 0

describe.each(testDialects())('import files in parts on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const parts = (accountId: string, importId?: string) => {
    let query = t.db
      .selectFrom('contact_import_file_parts')
      .select(['import_id', 'part', 'data'])
      .where('account_id', '=', accountId)
    if (importId !== undefined) {
      query = query.where('import_id', '=', importId)
    }
    return query.orderBy('import_id').orderBy('part').execute()
  }

  it('stores a file in parts of 256 KiB, reads it back byte for byte, and deletes every part', async () => {
    const { accountId } = await signUp(t.app, `parts-${++accounts}@example.com`)
    // Any bytes, NUL included: the job reports a file that is not UTF-8, so it is kept as sent.
    const file = randomBytes(2 * IMPORT_PART_BYTES + 1000)
    file[0] = 0
    const id = newId('contactImport')
    await writeImportFile(t.db, accountId, id, file, new Date().toISOString())

    const stored = await parts(accountId, id)
    expect(stored.map((p) => [p.part, p.data.length])).toEqual([
      [0, IMPORT_PART_BYTES],
      [1, IMPORT_PART_BYTES],
      [2, 1000],
    ])
    expect(Buffer.compare(Buffer.from((await readImportFile(t.db, accountId, id)) ?? []), file)).toBe(0)

    await deleteImportFile(t.db, accountId, id)
    expect(await parts(accountId, id)).toEqual([])
    expect(await readImportFile(t.db, accountId, id)).toBeUndefined()
  })

  it("an accepted upload deletes the account's parts over an hour old; a refused one and others' keep theirs", async () => {
    const { client, accountId } = await signUp(t.app, `stray-${++accounts}@example.com`)
    const other = await signUp(t.app, `stray-other-${++accounts}@example.com`)
    const longAgo = new Date(Date.now() - 2 * HOUR).toISOString()
    const bytes = new TextEncoder().encode('email\nx@example.com\n')
    // A crash between an upload's parts and its job's row, two hours ago.
    const stray = newId('contactImport')
    await writeImportFile(t.db, accountId, stray, bytes, longAgo)
    // An upload still being stored: no job row yet, a minute old.
    const storing = newId('contactImport')
    await writeImportFile(t.db, accountId, storing, bytes, new Date(Date.now() - 60_000).toISOString())
    // A job queued two hours ago and not yet run keeps its file.
    const queued = newId('contactImport')
    await writeImportFile(t.db, accountId, queued, bytes, longAgo)
    await insertImport(t.db, accountId, { id: queued, fileName: 'q.csv', now: longAgo })
    // Another account's stray parts are its own next upload's business.
    const othersStray = newId('contactImport')
    await writeImportFile(t.db, other.accountId, othersStray, bytes, longAgo)
    const importIds = async (id: string) => (await parts(id)).map((p) => p.import_id).sort()

    // The queued job holds the account's one unfinished import: this upload is refused (409),
    // stores nothing and deletes nothing.
    const refused = await client.uploadCsv(accountId, 'email\nada@example.com\n')
    expect(refused.statusCode, refused.body).toBe(409)
    expect(await importIds(accountId)).toEqual([queued, storing, stray].sort())

    // The job ends, its file left behind (a crash between its end and the file's delete): the next
    // upload is accepted and deletes the hour-old parts, not the minute-old ones nor another account's.
    await t.db
      .updateTable('contact_imports')
      .set({ state: 'done', finished_at: longAgo })
      .where('account_id', '=', accountId)
      .where('id', '=', queued)
      .execute()
    const accepted = await client.uploadCsv(accountId, 'email\nada@example.com\n')
    expect(accepted.statusCode, accepted.body).toBe(303)
    await t.deps.imports.drain()
    expect(await importIds(accountId)).toEqual([storing])
    expect(await importIds(other.accountId)).toEqual([othersStray])
  })
})
