// Sliding-window limits counted from timestamped rows (sign-ups, key changes in the audit log): the
// rows are the count, so every instance sees the same one without another store.
import { type SelectQueryBuilder, sql } from 'kysely'

export interface SlidingWindow {
  /** Events allowed in any window. */
  max: number
  windowMs: number
}

/** The start of the window that ends at `now`, as the rows store time: an event at or before it no longer counts. */
export const windowStart = (now: Date, windowMs: number): string => new Date(now.getTime() - windowMs).toISOString()

/**
 * Seconds until one of the events leaves the window, so that one more is allowed; 0 while fewer
 * than `max` are in it. `newestFirst`: the timestamps of the newest events in the window (the
 * first `max` are enough), newest first.
 */
export function secondsUntilOneLeaves(newestFirst: readonly string[], window: SlidingWindow, now: Date): number {
  const oldest = newestFirst[window.max - 1]
  if (oldest === undefined) {
    return 0
  }
  return Math.max(1, Math.ceil((Date.parse(oldest) + window.windowMs - now.getTime()) / 1000))
}

/**
 * The wait before one more event is allowed. `events`: the limiter's rows, filtered to the ones it
 * counts, with an `at` column; this reads at most `max` of them in the window, newest first.
 */
export async function retryAfter<DB, TB extends keyof DB>(
  events: SelectQueryBuilder<DB, TB, object>,
  window: SlidingWindow,
  now: Date,
): Promise<number> {
  const at = sql.ref<string>('at')
  const newest = await events
    .select(at.as('at'))
    .$castTo<{ at: string }>()
    .where(at, '>', windowStart(now, window.windowMs))
    .orderBy(at, 'desc')
    .limit(window.max)
    .execute()
  return secondsUntilOneLeaves(
    newest.map((row) => row.at),
    window,
    now,
  )
}
