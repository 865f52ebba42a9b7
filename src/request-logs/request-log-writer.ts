// Writes the request log off the request path: a response adds its entry to its tenant's pending
// list, and batches are stored every FLUSH_MS, or sooner once WRITE_MAX are pending, a tenant and a
// write at a time with the event loop free between writes (docs/request-log.md).
import { setImmediate as yieldToRequests } from 'node:timers/promises'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { inTransaction } from '../db/transaction.js'
import { timeOfId } from '../lib/ids.js'
import { byId, type StoredEntry } from './request-log.js'
import { CHUNK_ENTRIES_MAX, storeRequestLogs } from './request-logs.store.js'

/** How long an entry waits at most before it is written: what a kill -9 can lose (docs/request-log.md). */
export const FLUSH_MS = 1000
/**
 * Entries stored by one transaction at most (several chunks), and how many pending entries start a
 * flush before FLUSH_MS: a transaction's own cost is shared by this many requests.
 */
export const WRITE_MAX = 4 * CHUNK_ENTRIES_MAX
/**
 * Entries of one tenant held while a flush is under way at most; past them its requests are counted,
 * not stored, so one tenant's flood cannot fill the memory or crowd out another's entries.
 */
export const PENDING_MAX_PER_TENANT = 10_000

export interface RequestLogWriter {
  record(tenantId: string, entry: StoredEntry): void
  /** Stores what is pending, of one tenant or of all; resolves once it is stored. */
  flush(tenantId?: string): Promise<void>
  /** Stores everything pending and stops the timer (the drain at SIGTERM). */
  stop(): Promise<void>
  /** Where a failed write is reported (the app's logger); the entries it held are lost. */
  reportErrorsTo(report: (error: unknown) => void): void
}

interface Pending {
  entries: StoredEntry[]
  /** Requests past PENDING_MAX_PER_TENANT (so entries is full): counted on the newest entry's day. */
  overflow: number
}

const DAY_MS = 86_400_000
const dayOf = (entry: StoredEntry): number => Math.floor(timeOfId(entry[0]) / DAY_MS)

export function createRequestLogWriter(options: {
  db: Kysely<Database>
  maxPerDay: number
  /** Each entry's outcome: stored, capped (counted, not stored), failed. */
  count(outcome: 'stored' | 'capped' | 'failed', entries: number): void
}): RequestLogWriter {
  // Set by buildApp to the app's logger: only an app records requests.
  let report: (error: unknown) => void = () => {}
  let pending = new Map<string, Pending>()
  let size = 0
  let soon = false
  // One flush at a time, in order: a tenant's entries are stored in the order they came.
  let flushing: Promise<void> = Promise.resolve()

  async function store(tenantId: string, { entries, overflow }: Pending): Promise<void> {
    // In id order (a slow request's entry comes after quicker later ones), so a chunk is a range of ids.
    entries.sort(byId)
    for (let start = 0; start < entries.length; ) {
      // A write is one day's: the day's count caps it.
      const day = dayOf(entries[start] as StoredEntry)
      let end = Math.min(entries.length, start + WRITE_MAX)
      if (dayOf(entries[end - 1] as StoredEntry) !== day) {
        // Sorted: the day ends somewhere in between (a flush past midnight UTC).
        end = start + 1
        while (dayOf(entries[end] as StoredEntry) === day) {
          end++
        }
      }
      const chunk = entries.slice(start, end)
      const received = chunk.length + (end === entries.length ? overflow : 0)
      try {
        const stored = await inTransaction(options.db, (trx) =>
          storeRequestLogs(
            trx,
            tenantId,
            new Date(day * DAY_MS).toISOString().slice(0, 10),
            chunk,
            received,
            options.maxPerDay,
          ),
        )
        options.count('stored', stored)
        options.count('capped', received - stored)
      } catch (error) {
        options.count('failed', chunk.length)
        report(error)
      }
      start = end
      await yieldToRequests()
    }
  }

  function take(tenantId: string | undefined): Map<string, Pending> {
    if (tenantId === undefined) {
      const taken = pending
      pending = new Map()
      size = 0
      return taken
    }
    const one = pending.get(tenantId)
    if (!one) {
      return new Map()
    }
    pending.delete(tenantId)
    size -= one.entries.length
    return new Map([[tenantId, one]])
  }

  function flush(tenantId?: string): Promise<void> {
    flushing = flushing.then(async () => {
      for (const [tenant, entries] of take(tenantId)) {
        await store(tenant, entries)
      }
    })
    return flushing
  }

  const timer = setInterval(() => {
    if (size > 0) {
      void flush()
    }
  }, FLUSH_MS)
  timer.unref()

  return {
    record(tenantId, entry) {
      let mine = pending.get(tenantId)
      if (!mine) {
        mine = { entries: [], overflow: 0 }
        pending.set(tenantId, mine)
      }
      if (mine.entries.length >= PENDING_MAX_PER_TENANT) {
        mine.overflow++
        return
      }
      mine.entries.push(entry)
      size++
      if (size >= WRITE_MAX && !soon) {
        soon = true
        setImmediate(() => {
          soon = false
          void flush()
        })
      }
    },
    flush,
    async stop() {
      clearInterval(timer)
      await flush()
    },
    reportErrorsTo(reporter) {
      report = reporter
    },
  }
}
