// Tenant-scoped events: written in the change's transaction at their feed position
// (feed-position.ts), read as the feed in that order, and purged after their retention.
import { dialectOf } from '../db/dialect.js'
import { purgeOlderThan } from '../db/retention.js'
import { bind, rawSql, sqlFor } from '../db/statement.js'
import type { Db, Trx } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import type { PageRow } from '../http/pagination.js'
import type { EventType, ListEventsFilters } from './events.js'
import {
  feedFence,
  formatFeedPosition,
  POSTGRES_EVENT_POSITION,
  parseFeedPosition,
  SQLITE_NEXT_EVENT_POSITION,
} from './feed-position.js'

const INSERT_EVENTS = {
  postgres: sqlFor('postgres')`
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, id, ${rawSql(POSTGRES_EVENT_POSITION)}, ${'type'}, ${'now'}, body
    from unnest(${'ids'}::text[], ${'bodies'}::text[]) as e(id, body)`,
  sqlite: sqlFor('sqlite')`
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, value ->> 0, ${'position'}, ${'type'}, ${'now'}, value ->> 1 from json_each(${'events'})`,
  /** sqlite for one event: no JSON to build and parse on the path of every single write. */
  sqliteOne: sqlFor('sqlite')`
    insert into events (account_id, id, tx_id, type, created_at, body)
    values (${'account'}, ${'id'}, ${'position'}, ${'type'}, ${'now'}, ${'body'})`,
  sqlitePosition: sqlFor('sqlite')`${rawSql(SQLITE_NEXT_EVENT_POSITION)}`,
}

/**
 * Writes events of one type, given as [id, body] (events.ts newEvent, eventBody), in the change's
 * transaction; the feed lists them in their ids' order.
 */
export async function insertEvents(
  trx: Trx,
  accountId: string,
  now: string,
  type: EventType,
  events: ReadonlyArray<readonly [string, string]>,
): Promise<void> {
  if (events.length === 0) {
    return
  }
  if (dialectOf(trx) === 'postgres') {
    const ids = events.map(([id]) => id)
    const bodies = events.map(([, body]) => body)
    await trx.executeQuery(bind(INSERT_EVENTS.postgres, { account: accountId, type, now, ids, bodies }))
    return
  }
  const { rows } = await trx.executeQuery<{ last_position: number }>(bind(INSERT_EVENTS.sqlitePosition, {}))
  const position = rows[0]?.last_position
  if (position === undefined) {
    throw new Error('event_sequence has no events row: are the migrations applied?')
  }
  const [one] = events
  await trx.executeQuery(
    events.length === 1 && one
      ? bind(INSERT_EVENTS.sqliteOne, { account: accountId, id: one[0], position, type, now, body: one[1] })
      : bind(INSERT_EVENTS.sqlite, { account: accountId, position, type, now, events: JSON.stringify(events) }),
  )
}

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
