// The CSV import's check, run on a worker thread (import-check.worker.ts): a job hands it the file
// and hears progress and the verdict, then pulls the checked rows a range at a time as it writes
// them. Parsing and checking a 10,000-row file allocates tens of MB; on the event loop its garbage
// collection blocked other tenants' requests for up to 116 ms even though the step yielded every
// 3 ms of work (docs/csv-import.md). On a worker thread that heap and its collections are the
// worker's: the event loop receives only what one write transaction needs (docs/tenant-isolation.md).
//
// On every dialect, not only SQLite: the parse is JavaScript on the event loop whatever the driver,
// so PostgreSQL's loop paid the same collections, and one code path is tested on all three databases.
//
// On an SQLite file the same thread reads the stored upload, counts the new emails, writes the rows
// and reads CSV export pages on a connection of its own (import-job.ts, contacts.csv-export.ts).
//
// One worker per runner, started at the first import or export and ended after IDLE_MS without
// one: starting it costs 220–270 ms of CPU (its module graph, from dist/, load average ~15), too
// much to pay per job.
import { Worker } from 'node:worker_threads'
import type { SqliteConfig } from '../config.js'
import type { ExportPage } from '../contacts/contacts.csv-export.js'
import type { ImportError, ImportRow } from '../contacts/contacts.csv-import.js'
import type { SliceRequest, SliceResult } from './import-slice.js'

/** An upload as stored (imports.store.ts), read by the worker on its own connection. */
export interface StoredFile {
  accountId: string
  importId: string
}

/** A slice of a checked file's rows, [from, to), written by the worker on its own connection. */
export type WorkerSlice = Omit<SliceRequest, 'rows'> & { to: number }

/** What the worker is started with: the SQLite file it may open a connection of its own to. */
export interface WorkerOptions {
  database: SqliteConfig | undefined
}

export type CheckRequest =
  | { type: 'check'; job: number; file: Uint8Array | StoredFile }
  /** Once the file is good: rows [from, to), or only their emails. */
  | { type: 'rows' | 'emails'; job: number; id: number; from: number; to: number }
  | { type: 'write'; job: number; id: number; slice: WorkerSlice }
  /** A page of an account's CSV export, read on the worker's own connection (no file, no check). */
  | { type: 'export-page'; job: number; id: number; accountId: string; afterId?: string }
  /** How many of the file's emails the account has no contact with (the contacts it would create). */
  | { type: 'count-new'; job: number; id: number; accountId: string }
  /** The job is over (or stopped): the worker forgets its rows. */
  | { type: 'release'; job: number }

export type CheckReply =
  | { type: 'progress'; job: number; checked: number; total: number }
  | { type: 'failed'; job: number; errors: ImportError[]; count: number }
  | { type: 'checked'; job: number; total: number }
  | { type: 'crashed'; job: number; message: string }
  | { type: 'rows'; job: number; id: number; rows: ImportRow[] }
  | { type: 'emails'; job: number; id: number; emails: string[] }
  | { type: 'written'; job: number; id: number; result: SliceResult }
  | { type: 'counted'; job: number; id: number; created: number }
  | { type: 'export-page'; job: number; id: number; page: ExportPage }
  /** A write or count failed (the database's error, e.g. SQLITE_FULL): nothing of a slice is written. */
  | { type: 'unwritten'; job: number; id: number; message: string; code: string | undefined }

/** A good file, checked and held by the worker until close(). */
export interface CheckedFile {
  total: number
  rows(from: number, to: number): Promise<ImportRow[]>
  emails(from: number, to: number): Promise<string[]>
  /** countNewEmails for every row, on the worker's own connection to the SQLite file. */
  countNew(accountId: string): Promise<number>
  /** Writes a slice of the rows on the worker's own connection to the SQLite file. */
  write(slice: WorkerSlice): Promise<SliceResult>
  /** The worker forgets the rows. */
  close(): void
}

/** A bad file: its first problems (IMPORT_PROBLEMS_KEPT at most, cut in the worker) and their count. */
export type FileCheck = { ok: true; file: CheckedFile } | { ok: false; errors: ImportError[]; count: number }

export interface ImportChecker {
  /**
   * The worker has a connection of its own to the SQLite file (the database is one): it reads
   * stored uploads, counts new emails, writes rows and reads export pages there. Otherwise the
   * job and the export do those on the serving connection.
   */
  readonly ownConnection: boolean
  /**
   * Checks the file on the worker thread. `onProgress` hears the rows checked (the job records them
   * and renews its lease); its calls are serialized, and a report that arrives while one runs
   * replaces any older one still waiting. Rejects with the signal's reason when it aborts.
   */
  check(
    file: Uint8Array | StoredFile,
    onProgress: (checked: number, total: number) => Promise<void>,
    signal: AbortSignal,
  ): Promise<FileCheck>
  /**
   * A page of the account's CSV export read and written on the worker thread, on its own connection
   * to the SQLite file: the serving thread only passes the text on (contacts.csv-export.ts).
   */
  exportPage(accountId: string, afterId: string | undefined): Promise<ExportPage>
  /** Ends the worker (the runner's close); jobs still using it fail, and no new one starts. */
  close(): Promise<void>
  /** The worker's thread id while it runs, for tests. */
  readonly threadId: number | undefined
}

/** A worker without a job for this long is ended (its heap, some tens of MB, given back). */
const IDLE_MS = 30_000

type Listener = (reply: CheckReply) => void
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** The reply of the expected type, or the worker's failure (the database's error, with its code) thrown. */
function answer<T extends CheckReply['type']>(reply: CheckReply, type: T): Extract<CheckReply, { type: T }> {
  if (reply.type === type) {
    return reply as Extract<CheckReply, { type: T }>
  }
  throw Object.assign(new Error(reply.type === 'unwritten' ? reply.message : `unexpected reply ${reply.type}`), {
    code: reply.type === 'unwritten' ? reply.code : undefined,
  })
}

/**
 * Under tsx or vitest this module is TypeScript source and so is the worker next to it, which then
 * needs tsx's loader (a worker thread does not inherit the parent's module hooks); from dist/ both
 * are JavaScript and the worker starts without flags.
 */
function startWorker(workerData: WorkerOptions): Worker {
  const fromSource = import.meta.url.endsWith('.ts')
  const url = new URL(`./import-check.worker.${fromSource ? 'ts' : 'js'}`, import.meta.url)
  return new Worker(url, { workerData, ...(fromSource ? { execArgv: ['--import', 'tsx'] } : {}) })
}

/** `database`: the SQLite file, when the database is one, for the worker's own connection. */
export function createImportChecker({
  database,
  idleMs = IDLE_MS,
}: {
  database?: SqliteConfig | undefined
  idleMs?: number
} = {}): ImportChecker {
  let worker: Worker | undefined
  let idleTimer: NodeJS.Timeout | undefined
  /** Each job's listener, and the worker it talks to: a worker that is lost fails only its own. */
  const jobs = new Map<number, { hear: Listener; fail: (error: unknown) => void; thread: Worker }>()
  let closed = false
  /** The write slice in the worker, if any: the next one is sent once it has been answered. */
  let writing: Promise<unknown> = Promise.resolve()
  let nextJob = 0
  let nextRequest = 0

  function ensureWorker(): Worker {
    if (closed) {
      throw new Error('the import worker was closed (the process is stopping)')
    }
    clearTimeout(idleTimer)
    if (worker) {
      return worker
    }
    const started = startWorker({ database })
    started.on('message', (reply: CheckReply) => jobs.get(reply.job)?.hear(reply))
    const lost = (error: unknown) => {
      if (worker === started) {
        worker = undefined
      }
      for (const job of [...jobs.values()]) {
        if (job.thread === started) {
          job.fail(error)
        }
      }
    }
    started.on('error', lost)
    started.on('exit', (code) => lost(new Error(`the import check's worker exited (code ${code})`)))
    worker = started
    return started
  }

  /** Called when a job lets go of the worker: with none left, it may end after IDLE_MS. */
  function idle(): void {
    if (jobs.size > 0 || !worker) {
      return
    }
    // An idle worker does not keep the process alive (the CLI, tests), nor does its timer.
    worker.unref()
    const idleWorker = worker
    idleTimer = setTimeout(() => {
      if (worker === idleWorker && jobs.size === 0) {
        worker = undefined
        void idleWorker.terminate()
      }
    }, idleMs)
    idleTimer.unref()
  }

  async function check(
    file: Uint8Array | StoredFile,
    onProgress: (checked: number, total: number) => Promise<void>,
    signal: AbortSignal,
  ): Promise<FileCheck> {
    signal.throwIfAborted()
    const thread = ensureWorker()
    thread.ref()
    const job = nextJob++
    const waiting = new Map<number, { resolve: (reply: CheckReply) => void; reject: (error: unknown) => void }>()
    let ended: unknown
    let settle: { resolve: (reply: CheckReply) => void; reject: (error: unknown) => void } | undefined

    let progressing: Promise<void> = Promise.resolve()
    let latest: { checked: number; total: number } | undefined
    const report = () => {
      const next = latest
      latest = undefined
      return next ? onProgress(next.checked, next.total) : Promise.resolve()
    }

    const release = () => {
      if (jobs.delete(job)) {
        thread.postMessage({ type: 'release', job } satisfies CheckRequest)
        idle()
      }
    }
    const fail = (error: unknown) => {
      ended ??= error
      jobs.delete(job)
      settle?.reject(ended)
      for (const request of waiting.values()) {
        request.reject(ended)
      }
      waiting.clear()
      idle()
    }
    jobs.set(job, {
      thread,
      fail,
      hear(reply) {
        switch (reply.type) {
          case 'progress':
            latest = reply
            progressing = progressing.then(report)
            break
          case 'failed':
          case 'checked':
            settle?.resolve(reply)
            break
          case 'crashed':
            fail(new Error(`the import's check failed: ${reply.message}`))
            break
          default:
            waiting.get(reply.id)?.resolve(reply)
            waiting.delete(reply.id)
        }
      },
    })
    const onAbort = () => {
      release()
      fail(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })

    let outcome: CheckReply
    try {
      outcome = await new Promise<CheckReply>((resolve, reject) => {
        settle = { resolve, reject }
        // Bytes are copied to the worker (3–5 MB, a memcpy): the caller's buffer may be a view
        // that the driver still owns. A stored file is only named: the worker reads it.
        thread.postMessage({ type: 'check', job, file } satisfies CheckRequest)
      })
      await progressing
    } catch (error) {
      progressing.catch(() => {})
      signal.removeEventListener('abort', onAbort)
      release()
      throw error
    }
    if (outcome.type !== 'checked') {
      signal.removeEventListener('abort', onAbort)
      jobs.delete(job)
      idle()
      return outcome.type === 'failed'
        ? { ok: false, errors: outcome.errors, count: outcome.count }
        : { ok: false, errors: [], count: 0 }
    }
    // From here a stop does not cut the job's requests short: a write slice the worker may already
    // be running would commit after the job let go of its lease. The job checks the signal after
    // each request instead (import-job.ts), and the runner closes the worker only once jobs ended.
    signal.removeEventListener('abort', onAbort)

    const ask = (request: DistributiveOmit<Extract<CheckRequest, { id: number }>, 'job' | 'id'>) =>
      new Promise<CheckReply>((resolve, reject) => {
        if (ended !== undefined) {
          reject(ended)
          return
        }
        const id = nextRequest++
        waiting.set(id, { resolve, reject })
        thread.postMessage({ ...request, job, id } satisfies CheckRequest)
      })
    return {
      ok: true,
      file: {
        total: outcome.total,
        async rows(from, to) {
          const reply = await ask({ type: 'rows', from, to })
          return reply.type === 'rows' ? reply.rows : []
        },
        async emails(from, to) {
          const reply = await ask({ type: 'emails', from, to })
          return reply.type === 'emails' ? reply.emails : []
        },
        async countNew(accountId) {
          return answer(await ask({ type: 'count-new', accountId }), 'counted').created
        },
        write(slice) {
          // One slice at a time in the worker, whatever the number of jobs: the serving
          // connection's writes then wait for one slice's commit at most, not for a queue of them.
          const written = writing.then(async () => answer(await ask({ type: 'write', slice }), 'written').result)
          writing = written.catch(() => {})
          return written
        },
        close() {
          release()
        },
      },
    }
  }

  /** A job of one request: the export's pages hold nothing on the worker between them. */
  function exportPage(accountId: string, afterId: string | undefined): Promise<ExportPage> {
    const thread = ensureWorker()
    thread.ref()
    const job = nextJob++
    return new Promise<CheckReply>((resolve, reject) => {
      jobs.set(job, { thread, hear: resolve, fail: reject })
      thread.postMessage({
        type: 'export-page',
        job,
        id: 0,
        accountId,
        ...(afterId === undefined ? {} : { afterId }),
      } satisfies CheckRequest)
    })
      .then((reply) => answer(reply, 'export-page').page)
      .finally(() => {
        jobs.delete(job)
        idle()
      })
  }

  return {
    ownConnection: database !== undefined,
    check,
    exportPage,
    async close() {
      closed = true
      clearTimeout(idleTimer)
      const ending = worker
      worker = undefined
      await ending?.terminate()
    },
    get threadId() {
      return worker?.threadId
    },
  }
}
