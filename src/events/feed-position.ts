// The events feed's order: every event's position (`tx_id`, then its id), assigned so that a
// poller walking the feed never misses an event, on both dialects. The one place where the feed
// differs by dialect (docs/api-decisions.md, "The events feed: commit order").
//
// Ids are made before the commit, so with concurrent writers an id order is not commit order: an
// event committed late could land behind a cursor already passed. Instead:
// - PostgreSQL: the position is the writing transaction's id, and the feed serves only events of
//   transactions below the reader's snapshot xmin. Every transaction below xmin has ended, so no
//   event can appear later below a position the reader was served; one that commits later has a
//   transaction id at or above that xmin. No shared counter: writers never queue on a hot row. A
//   writing transaction left open anywhere on the server holds xmin back: events then appear
//   late, never lost (read-only ones take no transaction id and do not).
// - SQLite: one writer at a time, holding the write lock from its first write to its commit. The
//   position is a counter incremented under that lock, so positions are handed out in commit
//   order and a committed position is never followed by a smaller one. A counter, not max + 1:
//   the retention purge can empty an account, and positions must never go back.
import { CompiledQuery, type RawBuilder, sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Db, Trx } from '../db/transaction.js'

export interface FeedPosition {
  txId: number
  id: string
}

/**
 * PostgreSQL: the position of an event written in the current transaction, as an SQL expression
 * (for writes that put it in their own statement, src/contacts/contact-writes.ts). xid8 (epoch and
 * xid) has no cast to bigint; its text form has one.
 */
export const POSTGRES_EVENT_POSITION = 'pg_current_xact_id()::text::bigint'

/** SQLite: takes the next position under the write lock; returns `last_position`. */
export const SQLITE_NEXT_EVENT_POSITION =
  "update event_sequence set last_position = last_position + 1 where name = 'events' returning last_position"

/** The position of an event being written in `trx`, for its `tx_id`. */
export async function newEventPosition(trx: Trx): Promise<number | RawBuilder<number>> {
  if (dialectOf(trx) === 'postgres') {
    return sql<number>`${sql.raw(POSTGRES_EVENT_POSITION)}`
  }
  const {
    rows: [row],
  } = await trx.executeQuery<{ last_position: number }>(CompiledQuery.raw(SQLITE_NEXT_EVENT_POSITION, []))
  if (!row) {
    throw new Error('event_sequence has no events row: are the migrations applied?')
  }
  return row.last_position
}

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
