// Sliding-window limits counted from timestamped rows (sign-ups per address, key changes in the
// audit log): at most `max` events in any `windowMs`. The rows are the count, so every instance behind a
// load balancer sees the same one without another store. (The API's per-account and failed-auth
// limits are token buckets: token-bucket.ts.)
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
 * The wait before one more event is allowed (see secondsUntilOneLeaves). `events`: the limiter's
 * rows, filtered to the ones it counts; their table has an `at` column (ISO-8601 UTC). This adds
 * the window and reads at most `max` timestamps, newest first.
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
