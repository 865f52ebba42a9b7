// The events feed's order: an event's position is (`tx_id`, id), assigned so that a poller never
// misses an event committed after it passed that event's id. PostgreSQL: the writing transaction's
// id, served only below the reader's snapshot xmin. SQLite: a counter taken under the write lock.
// Why each is safe: docs/api-decisions.md, "The events feed: commit order".
import { type RawBuilder, sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Db } from '../db/transaction.js'

export interface FeedPosition {
  txId: number
  id: string
}

/**
 * PostgreSQL: the position of an event written in the current transaction, as an SQL expression
 * (src/contacts/contact-writes.ts writes it into its statements). xid8 has no cast to bigint; its
 * text form has one.
 */
export const POSTGRES_EVENT_POSITION = 'pg_current_xact_id()::text::bigint'

/** SQLite: takes the next position under the write lock; returns `last_position`. */
export const SQLITE_NEXT_EVENT_POSITION =
  "update event_sequence set last_position = last_position + 1 where name = 'events' returning last_position"

/**
 * Below this position every event that will ever exist is committed and visible to the query:
 * PostgreSQL's snapshot xmin (the statement's own snapshot); none on SQLite, where everything
 * committed is final in order.
 */
export function feedFence(db: Db): RawBuilder<number> | undefined {
  return dialectOf(db) === 'postgres' ? sql<number>`pg_snapshot_xmin(pg_current_snapshot())::text::bigint` : undefined
}

/** A position as a cursor carries it: `<tx_id>:<id>`. */
export const formatFeedPosition = ({ txId, id }: FeedPosition): string => `${txId}:${id}`

/**
 * The id of a position between events: `evt_` sorts before every event id, so `(txId, 'evt_')`
 * stands just before every event of `txId` and after every event of an earlier one.
 */
const BEFORE_IDS = 'evt_'

/** Before every event: where a walk of an empty feed goes on from. */
export const FEED_START = formatFeedPosition({ txId: 0, id: BEFORE_IDS })

/**
 * The end of the feed as it is now: after every event this query could serve, before every event it
 * could not yet. PostgreSQL: just before the fence, whose older transactions have all ended; SQLite:
 * past the last position taken, every one of which is committed (a reader sees no write in progress).
 */
export async function feedEnd(db: Db): Promise<string> {
  if (dialectOf(db) === 'postgres') {
    const { rows } = await sql<{
      fence: string
    }>`select pg_snapshot_xmin(pg_current_snapshot())::text as fence`.execute(db)
    return formatFeedPosition({ txId: Number(rows[0]?.fence), id: BEFORE_IDS })
  }
  const last = await db
    .selectFrom('event_sequence')
    .select('last_position')
    .where('name', '=', 'events')
    .executeTakeFirstOrThrow()
  return formatFeedPosition({ txId: Number(last.last_position) + 1, id: BEFORE_IDS })
}

const POSITION = /^(\d{1,19}):(evt_\w*)$/

/**
 * The position a cursor names, or undefined if it names none. A cursor issued before positions
 * existed carries a bare event id: those events were all given position 0 by the migration.
 */
export function parseFeedPosition(key: string): FeedPosition | undefined {
  if (key.startsWith('evt_')) {
    return { txId: 0, id: key }
  }
  const match = POSITION.exec(key)
  return match ? { txId: Number(match[1]), id: match[2] as string } : undefined
}
