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

const POSITION = /^(\d{1,19}):(evt_\w+)$/

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
