// The retention purge shared by the tables kept EVENT_RETENTION_DAYS (events, webhook deliveries):
// rows created before the cutoff, deleted in statements of `batch` rows, each its own transaction,
// so a large purge never holds the database long.
import { sql } from 'kysely'
import type { Db } from './transaction.js'

/** Rows one purge statement deletes at most. */
export const PURGE_BATCH = 1000

/** Tables with `account_id`, `id` and `created_at` that a retention applies to. */
export type RetainedTable = 'events' | 'webhook_deliveries'

/** Deletes the rows of `table` created before `now` minus `retentionDays`; returns how many. */
export async function purgeOlderThan(
  db: Db,
  table: RetainedTable,
  now: Date,
  retentionDays: number,
  batch = PURGE_BATCH,
): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000).toISOString()
  let purged = 0
  for (;;) {
    const result = await sql`
      delete from ${sql.table(table)} where (account_id, id) in (
        select account_id, id from ${sql.table(table)} where created_at < ${cutoff} limit ${batch})`.execute(db)
    const deleted = Number(result.numAffectedRows ?? 0)
    purged += deleted
    if (deleted < batch) {
      return purged
    }
  }
}
