// The retention purge shared by the tables kept EVENT_RETENTION_DAYS (events, webhook deliveries,
// finished CSV import jobs): rows older than the cutoff, deleted in statements of `batch` rows, each its own transaction,
// so a large purge never holds the database long.
import { sql } from 'kysely'
import type { Db } from './transaction.js'

/** Rows one purge statement deletes at most. */
export const PURGE_BATCH = 1000

/** Tables with `account_id` and `id` that a retention applies to. */
export type RetainedTable = 'events' | 'webhook_deliveries' | 'contact_imports'

/**
 * The column a row's age is read from. An import job is kept from when it finished: an unfinished
 * one has no finished_at (null is never before the cutoff), so a long or stuck job is never purged.
 */
const AGE_COLUMN: Record<RetainedTable, 'created_at' | 'finished_at'> = {
  events: 'created_at',
  webhook_deliveries: 'created_at',
  contact_imports: 'finished_at',
}

/** Deletes the rows of `table` older (AGE_COLUMN) than `now` minus `retentionDays`; returns how many. */
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
        select account_id, id from ${sql.table(table)} where ${sql.ref(AGE_COLUMN[table])} < ${cutoff} limit ${batch})`.execute(
      db,
    )
    const deleted = Number(result.numAffectedRows ?? 0)
    purged += deleted
    if (deleted < batch) {
      return purged
    }
  }
}
