// Tenant-scoped event reads (the feed in its order, feed-position.ts; one event by id), and the
// retention purge.
import { purgeOlderThan } from '../db/retention.js'
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

/** Deletes the events created before `now` minus the retention, in batches (db/retention.ts). */
export const purgeExpiredEvents = (db: Db, now: Date, retentionDays: number, batch?: number): Promise<number> =>
  purgeOlderThan(db, 'events', now, retentionDays, batch)
