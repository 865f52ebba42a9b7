// Writes the request log off the request path: a response adds its entry to its tenant's pending
// list, and batches are stored every FLUSH_MS, or sooner once WRITE_MAX are pending, a tenant and a
// write at a time with the event loop free between writes (docs/request-log.md).
import { setImmediate as yieldToRequests } from 'node:timers/promises'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { inTransaction } from '../db/transaction.js'
import { timeOfId } from '../lib/ids.js'
import type { StoredEntry } from './request-log.js'
import {
  addToChunk,
  CHUNK_ENTRIES_MAX,
  closeChunk,
  type OpenChunk,
  openChunk,
  type StoredChunk,
} from './request-log-chunk.js'
import { storeRequestLogs } from './request-logs.store.js'

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
  /** Full chunks, in the order they were opened, and the one being filled. */
  closed: StoredChunk[]
  open: OpenChunk | undefined
  entries: number
  /** Requests past PENDING_MAX_PER_TENANT: counted with the last write, on its day. */
  overflow: number
}

const entriesOf = (chunks: readonly StoredChunk[]): number => chunks.reduce((sum, chunk) => sum + chunk.size, 0)

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

  async function store(tenantId: string, { closed, open, overflow }: Pending): Promise<void> {
    const chunks = open === undefined ? closed : [...closed, closeChunk(open)]
    // A write is one day's, of WRITE_MAX entries at most: the day's count caps it.
    const writes: StoredChunk[][] = []
    for (const chunk of chunks) {
      const write = writes.findLast((candidate) => candidate[0]?.day === chunk.day)
      if (write !== undefined && entriesOf(write) + chunk.size <= WRITE_MAX) {
        write.push(chunk)
      } else {
        writes.push([chunk])
      }
    }
    for (const [index, write] of writes.entries()) {
      const entries = entriesOf(write)
      const received = entries + (index === writes.length - 1 ? overflow : 0)
      const day = new Date((write[0] as StoredChunk).day * 86_400_000).toISOString().slice(0, 10)
      try {
        const stored = await inTransaction(options.db, (trx) =>
          storeRequestLogs(trx, tenantId, day, write, received, options.maxPerDay),
        )
        options.count('stored', stored)
        options.count('capped', received - stored)
      } catch (error) {
        options.count('failed', entries)
        report(error)
      }
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
    size -= one.entries
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
        mine = { closed: [], open: undefined, entries: 0, overflow: 0 }
        pending.set(tenantId, mine)
      }
      if (mine.entries >= PENDING_MAX_PER_TENANT) {
        mine.overflow++
        return
      }
      const time = timeOfId(entry[0])
      if (mine.open === undefined || !addToChunk(mine.open, entry, time)) {
        if (mine.open !== undefined) {
          mine.closed.push(closeChunk(mine.open))
        }
        mine.open = openChunk(time)
        addToChunk(mine.open, entry, time)
      }
      mine.entries++
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
