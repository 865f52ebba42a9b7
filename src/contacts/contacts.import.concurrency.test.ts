// Import slices of one account written at once on the real PostgreSQL server, each in its own
// transaction (the contact service's importSlice): each slice is written, never failed by a
// deadlock, and the count equals the contacts afterwards. New rows between existing ones make a
// slice create and update in turn; with a count shard per change rather than per transaction,
// slices met on the shards in crossing orders. PostgreSQL only (PGlite and SQLite run one
// transaction at a time).
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { liveTenant } from '../accounts/tenant.js'
import { contactCount } from './contact-count.js'
import type { UpsertInput } from './contact-service.js'

describe.runIf(testDialects().includes('postgres'))('concurrent import chunks on postgres', () => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'postgres' })
  })
  afterAll(() => t.close())

  const CLIENTS = 4
  const importRows = (accountId: string, rows: UpsertInput[]) =>
    t.deps.contacts.importSlice(liveTenant(accountId), {
      rows,
      sliceMs: Number.POSITIVE_INFINITY,
      now: new Date().toISOString(),
      inTransaction: async () => {},
    })

  it('new rows between shared ones, many count changes per chunk: every chunk written, the count exact', async () => {
    const account = await t.createAccount()
    const shared = Array.from({ length: 10 }, (_, i) => `shared-${i}@ex.com`)
    await importRows(
      account.id,
      shared.map((email) => ({ email })),
    )
    for (let round = 0; round < 5; round++) {
      const settled = await Promise.allSettled(
        Array.from({ length: CLIENTS }, (_, client) => {
          // own-0, shared-0, own-1, shared-1, …: creates and updates in turn.
          const rows = shared.flatMap((email, i) => [
            { email: `r${round}-c${client}-${i}@ex.com` },
            { email, last_name: `r${round}c${client}` },
          ])
          return importRows(account.id, rows)
        }),
      )
      expect(
        settled.filter((s) => s.status === 'rejected').map((s) => String((s as PromiseRejectedResult).reason)),
      ).toEqual([])
    }
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from contacts where account_id = ${account.id}`.execute(t.db)
    expect(Number(rows[0]?.n)).toBe(10 + 5 * CLIENTS * 10)
    expect(await contactCount(t.db, account.id)).toBe(Number(rows[0]?.n))
  })
})
