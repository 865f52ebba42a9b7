// Wakes the long polls of GET /events?wait= when this instance commits an event of their tenant
// (docs/api-decisions.md, "Long polls of the events feed"). An event committed by another instance,
// or one PostgreSQL serves only once an older transaction has ended (feed-position.ts), is found by
// the poll's own re-check.

/** A long poll reads the feed again at least this often: the wait for what no signal announces. */
export const RECHECK_MS = 1000

/** After a signal whose event the feed did not serve yet, the feed is read this often (for RECHECK_MS). */
export const NOTIFIED_RECHECK_MS = 50

/** Long polls of one tenant waiting in one process at most; past it, 429 (docs/pagination.md). */
export const LONG_POLLS_PER_TENANT = 1000

export interface FeedSignal {
  /** An event of this tenant was committed here. */
  notify(tenantId: string): void
  /** Counts a long poll of the tenant as waiting until the returned leave(); undefined past the cap. */
  enterWait(tenantId: string): (() => void) | undefined
  /**
   * Where the tenant's notifications stand, taken before a read of the feed: a notification that
   * comes while the read is out wakes no one, and next() given this mark answers it at once.
   */
  mark(): number
  /**
   * Resolves true when the tenant is notified (or was since `since`, a mark), false after `ms` or once
   * `signal` aborts, whichever comes first. Holds nothing but a timer and a listener meanwhile: no
   * database connection.
   */
  next(tenantId: string, ms: number, signal: AbortSignal, since?: number): Promise<boolean>
}

/**
 * A tenant's last notification is remembered for one to two of these: a read of the feed is shorter.
 * One longer misses the instant answer, and the poll's re-check finds the event instead.
 */
const REMEMBERED_MS = RECHECK_MS

export function createFeedSignal(): FeedSignal {
  const waiting = new Map<string, Set<(notified: boolean) => void>>()
  const polls = new Map<string, number>()
  // Each tenant's last notification's number, in two generations: the older is dropped at each turn.
  let sent = 0
  let recent = new Map<string, number>()
  let older = new Map<string, number>()
  let turnedAt = performance.now()
  const notifiedSince = (tenantId: string, since: number) => (recent.get(tenantId) ?? older.get(tenantId) ?? 0) > since
  return {
    enterWait(tenantId) {
      const count = (polls.get(tenantId) ?? 0) + 1
      if (count > LONG_POLLS_PER_TENANT) {
        return undefined
      }
      polls.set(tenantId, count)
      let left = false
      return () => {
        if (!left) {
          left = true
          const rest = (polls.get(tenantId) ?? 1) - 1
          if (rest === 0) {
            polls.delete(tenantId)
          } else {
            polls.set(tenantId, rest)
          }
        }
      }
    },
    notify(tenantId) {
      const now = performance.now()
      if (now - turnedAt >= REMEMBERED_MS) {
        older = recent
        recent = new Map()
        turnedAt = now
      }
      sent += 1
      recent.set(tenantId, sent)
      const wakers = waiting.get(tenantId)
      if (wakers !== undefined) {
        waiting.delete(tenantId)
        for (const wake of wakers) {
          wake(true)
        }
      }
    },
    mark() {
      return sent
    },
    next(tenantId, ms, signal, since) {
      return new Promise((resolve) => {
        if (signal.aborted) {
          resolve(false)
          return
        }
        if (since !== undefined && notifiedSince(tenantId, since)) {
          resolve(true)
          return
        }
        const wake = (notified: boolean) => {
          clearTimeout(timer)
          signal.removeEventListener('abort', onAbort)
          waiting.get(tenantId)?.delete(wake)
          if (waiting.get(tenantId)?.size === 0) {
            waiting.delete(tenantId)
          }
          resolve(notified)
        }
        const onAbort = () => wake(false)
        const timer = setTimeout(() => wake(false), ms)
        signal.addEventListener('abort', onAbort, { once: true })
        let wakers = waiting.get(tenantId)
        if (wakers === undefined) {
          wakers = new Set()
          waiting.set(tenantId, wakers)
        }
        wakers.add(wake)
      })
    },
  }
}
