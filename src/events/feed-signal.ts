// Wakes the long polls of GET /events?wait= when this instance commits an event of their tenant
// (docs/api-decisions.md, "Long polls of the events feed"). An event committed by another instance,
// or one PostgreSQL serves only once an older transaction has ended (feed-position.ts), is found by
// the poll's own re-check.

/** A long poll reads the feed again at least this often: the wait for what no signal announces. */
export const RECHECK_MS = 1000

/**
 * After a signal whose event the feed did not serve yet, the feed is read again at least this much
 * later, and at most half the time since the signal later (src/events/events.routes.ts).
 */
export const NOTIFIED_RECHECK_MS = 50

/** Long polls of one tenant waiting in one process at most; past it, 429 (docs/pagination.md). */
export const LONG_POLLS_PER_TENANT = 1000

export interface FeedSignal {
  /** An event of this tenant was committed here. */
  notify(tenantId: string): void
  /** Counts a long poll of the tenant as waiting until the returned leave(); undefined past the cap. */
  enterWait(tenantId: string): (() => void) | undefined
  /**
   * A long poll's hold on its tenant's signals, from before its first read of the feed until it
   * answers (close()): a signal that comes while it reads is kept for its next wait.
   */
  watch(tenantId: string): FeedWatch
  /** One wait of a watch made for it: true when the tenant is signalled meanwhile (see FeedWatch.next). */
  next(tenantId: string, ms: number, signal: AbortSignal): Promise<boolean>
}

export interface FeedWatch {
  /** A read of the feed begins: what was signalled before it, the read sees. */
  reading(): void
  /**
   * Resolves true when the tenant was signalled since the last reading() (at once) or is meanwhile,
   * false after `ms` or once `signal` aborts, whichever comes first. Holds nothing but a timer and a
   * listener meanwhile: no database connection.
   */
  next(ms: number, signal: AbortSignal): Promise<boolean>
  close(): void
}

interface Watcher {
  signalled: boolean
  wake: ((signalled: boolean) => void) | undefined
}

export function createFeedSignal(): FeedSignal {
  const watchers = new Map<string, Set<Watcher>>()
  const polls = new Map<string, number>()
  const watch = (tenantId: string): FeedWatch => {
    const watcher: Watcher = { signalled: false, wake: undefined }
    let mine = watchers.get(tenantId)
    if (mine === undefined) {
      mine = new Set()
      watchers.set(tenantId, mine)
    }
    mine.add(watcher)
    return {
      reading() {
        watcher.signalled = false
      },
      next(ms, signal) {
        return new Promise((resolve) => {
          if (signal.aborted || watcher.signalled) {
            resolve(!signal.aborted)
            return
          }
          const wake = (signalled: boolean) => {
            clearTimeout(timer)
            signal.removeEventListener('abort', onAbort)
            watcher.wake = undefined
            resolve(signalled)
          }
          const onAbort = () => wake(false)
          const timer = setTimeout(() => wake(false), ms)
          signal.addEventListener('abort', onAbort, { once: true })
          watcher.wake = wake
        })
      },
      close() {
        watcher.wake?.(false)
        const set = watchers.get(tenantId)
        set?.delete(watcher)
        if (set?.size === 0) {
          watchers.delete(tenantId)
        }
      },
    }
  }
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
      for (const watcher of watchers.get(tenantId) ?? []) {
        watcher.signalled = true
        watcher.wake?.(true)
      }
    },
    watch,
    next(tenantId, ms, signal) {
      const once = watch(tenantId)
      return once.next(ms, signal).finally(() => once.close())
    },
  }
}
