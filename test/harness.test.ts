// The harness itself: a database handed on from one harness to the next is as the migrations made it.
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createTestHarness } from './harness.js'

// Only PGlite instances are handed on; SQLite and the server's schemas are new for every harness.
describe.runIf(testDialects().includes('pglite'))('test harness on PGlite', () => {
  const dialect = 'pglite'
  it('never hands on a database whose schema a test broke on purpose', async () => {
    const broken = await createTestHarness({ dialect })
    await broken.db.schema.dropTable('events').execute()
    await broken.close()
    // On PGlite the last instance given back is the next one taken: it must not be that one.
    const next = await createTestHarness({ dialect })
    try {
      const { rows } = await sql<{ n: number }>`select count(*) as n from events`.execute(next.db)
      expect(Number(rows[0]?.n)).toBe(0)
    } finally {
      await next.close()
    }
  })
})
