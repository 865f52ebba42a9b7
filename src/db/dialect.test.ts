// dialectOf reads the dialect from Kysely's adapter (an API Kysely marks internal): pinned here.
import { describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { openTestDatabase } from '../../test/harness.js'
import { dialectOf } from './dialect.js'

describe.each(testDialects())('dialectOf on %s', (dialect) => {
  it('names the dialect of the database and of its transactions', async () => {
    const { database, dispose } = await openTestDatabase(dialect, { migrated: true })
    try {
      const expected = dialect === 'sqlite' ? 'sqlite' : 'postgres'
      expect(dialectOf(database.db)).toBe(expected)
      expect(await database.db.transaction().execute(async (trx) => dialectOf(trx))).toBe(expected)
    } finally {
      await database.close()
      await dispose()
    }
  })
})
