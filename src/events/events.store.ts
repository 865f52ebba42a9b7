// Tenant-scoped event reads (the feed in its order, feed-position.ts; one event by id), and the
// retention purge.
import { type Kysely, sql } from 'kysely'
import type { Database } from '../db/schema.js'
import type { Db } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import type { PageRow } from '../http/pagination.js'
import type { ListEventsFilters } from './events.js'
import { feedFence, formatFeedPosition, parseFeedPosition } from './feed-position.js'

/**
 * A page of the feed: events after the cursor's position, in position order, up to the fence.
 * `afterId` is the previous page's last position as its cursor carries it.
 */
export async function listEventRows(
  db: Db,
  accountId: string,
  options: ListEventsFilters & { afterId: string | undefined; fetch: number },
): Promise<PageRow[]> {
  let query = db.selectFrom('events').select(['tx_id', 'id', 'body']).where('account_id', '=', accountId)
  if (options.type !== undefined) {
    query = query.where('type', '=', options.type)
  }
  const fence = feedFence(db)
  if (fence !== undefined) {
    query = query.where('tx_id', '<', fence)
  }
  if (options.afterId !== undefined) {
    const after = parseFeedPosition(options.afterId)
    if (after === undefined) {
      // Signed by us, so only a cursor of a future format could get here.
      throw new AppError('invalid_cursor', 'after is not a cursor this query issued.')
    }
    query = query.where(({ eb, refTuple, tuple }) => eb(refTuple('tx_id', 'id'), '>', tuple(after.txId, after.id)))
  }
  const rows = await query.orderBy('tx_id').orderBy('id').limit(options.fetch).execute()
  return rows.map((row) => ({
    id: row.id,
    body: row.body,
    position: formatFeedPosition({ txId: row.tx_id, id: row.id }),
  }))
}

/** Rows one purge statement deletes at most, so that a large purge never holds the database long. */
export const PURGE_BATCH = 1000

/**
 * Deletes the events created before `now` minus the retention, in statements of `batch` rows,
 * each its own transaction; returns how many.
 */
export async function purgeExpiredEvents(
  db: Kysely<Database>,
  now: Date,
  retentionDays: number,
  batch = PURGE_BATCH,
): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000).toISOString()
  let purged = 0
  for (;;) {
    const result = await sql`
      delete from events where (account_id, id) in (
        select account_id, id from events where created_at < ${cutoff} limit ${batch})`.execute(db)
    const deleted = Number(result.numAffectedRows ?? 0)
    purged += deleted
    if (deleted < batch) {
      return purged
    }
  }
}
