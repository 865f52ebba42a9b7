// Runs CSV import jobs in the background, at most IMPORT_CONCURRENCY at once in this process:
// woken when an upload is stored, and (once started by `serve`) polling for jobs left unfinished
// by a crash or queued beyond the cap. Tests call drain() instead of sleeping.
import type { Kysely } from 'kysely'
import type { SqliteConfig } from '../config.js'
import type { ContactService } from '../contacts/contact-service.js'
import type { Database } from '../db/schema.js'
import type { Clock } from '../lib/clock.js'
import { coalescedRun } from '../lib/coalesced-run.js'
import { traceJob } from '../observability/tracing.js'
import { createImportChecker, type ImportChecker } from './import-check.js'
import { ImportInterrupted, runImport, WRITE_CHUNK_ROWS } from './import-job.js'
import { claimNextImport, releaseImport } from './imports.store.js'

export interface ImportRunner {
  /** Look for work now (an upload was stored, or a job ended). */
  wake(): void
  /** Resume unfinished jobs and poll for more (the serving process); `report` hears unexpected failures. */
  start(report: (error: unknown, job: { accountId: string; id: string }) => void): void
  /** Stops after each running job's current chunk; their leases are released for the next start. */
  stop(): Promise<void>
  /**
   * Ends the worker thread, after stop() and once no request is served any more: it also reads
   * CSV exports still streaming when the process is told to stop (closeDeps, after app.close()).
   */
  close(): Promise<void>
  /** Until no job is running or claimable: tests wait for imports with it. */
  drain(): Promise<void>
  /** The jobs' worker thread, which also reads CSV exports on an SQLite file (contacts-csv.routes.ts). */
  readonly csvWorker: Pick<ImportChecker, 'ownConnection' | 'exportPage' | 'threadId'>
}

export interface ImportRunnerOptions {
  db: Kysely<Database>
  contacts: ContactService
  clock: Clock
  maxConcurrent: number
  /**
   * How long a claimed job is held without progress before another runner may resume it. Each
   * progress write renews it; a crashed process's jobs are resumed once it runs out.
   */
  leaseMs?: number
  chunkRows?: number
  pollMs?: number
  /** An SQLite file: the check's worker thread writes the rows on a connection of its own (import-job.ts). */
  sqliteFile?: SqliteConfig | undefined
}

export const IMPORT_LEASE_MS = 15_000
const POLL_MS = 2000

export function createImportRunner(options: ImportRunnerOptions): ImportRunner {
  const { db, clock, maxConcurrent } = options
  const jobDeps = {
    db,
    contacts: options.contacts,
    clock,
    leaseMs: options.leaseMs ?? IMPORT_LEASE_MS,
    chunkRows: options.chunkRows ?? WRITE_CHUNK_ROWS,
    checker: createImportChecker({ database: options.sqliteFile }),
  }
  const running = new Map<string, Promise<void>>()
  const stopping = new AbortController()
  let report: (error: unknown, job: { accountId: string; id: string }) => void = () => {}

  async function fill(): Promise<void> {
    while (!stopping.signal.aborted && running.size < maxConcurrent) {
      const job = await claimNextImport(db, clock.now(), jobDeps.leaseMs)
      if (!job) {
        return
      }
      const key = `${job.accountId}/${job.id}`
      const run = traceJob('csv import', () => runImport(jobDeps, job.accountId, job.id, stopping.signal), {
        'import.id': job.id,
      })
        .catch(async (error: unknown) => {
          // Interrupted or failed unexpectedly (database away): let a runner take it again.
          await releaseImport(db, job.accountId, job.id).catch(() => {})
          if (!(error instanceof ImportInterrupted)) {
            report(error, job)
          }
        })
        .finally(() => {
          running.delete(key)
          wake()
        })
      running.set(key, run)
    }
  }

  const filling = coalescedRun(fill, (error) => report(error, { accountId: '', id: '' }))
  const wake = filling.wake

  return {
    csvWorker: jobDeps.checker,
    wake,
    start(onError) {
      report = onError
      filling.poll(options.pollMs ?? POLL_MS)
    },
    async stop() {
      stopping.abort()
      await filling.stop()
      await Promise.all(running.values())
    },
    async close() {
      await jobDeps.checker.close()
    },
    async drain() {
      wake()
      // A job ending wakes the runner again, which claims any job queued meanwhile.
      while (filling.current || running.size > 0) {
        await filling.current
        await Promise.all(running.values())
      }
    },
  }
}
