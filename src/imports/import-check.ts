// The CSV import's worker thread, from the job's side (import-check.worker.ts is the thread): a job
// hands it the file and hears progress and the verdict, then pulls the checked rows a range at a
// time. Parsing a large file allocates tens of MB, and on the event loop its garbage collection
// blocked other tenants' requests (docs/tenant-isolation.md); on the worker that heap is its own.
// On an SQLite file the thread also reads the stored upload, counts the new emails, writes the
// rows and reads CSV export pages on a connection of its own, so those stay off the event loop too.
// The thread is called by name: one request type and one reply type (WorkerCall, WorkerReply).
import { Worker } from 'node:worker_threads'
import type { SqliteConfig } from '../config.js'
import type { ExportPage } from '../contacts/contacts.csv-export.js'
import type { ImportError, ImportRow } from './import-csv.js'
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

export type CheckVerdict = { ok: true; total: number } | { ok: false; errors: ImportError[]; count: number }

/** What the worker thread does, each call answered once (a check also reports progress). */
export interface WorkerCalls {
  /** Parses and checks the file, then keeps its rows under `job` until released. */
  check(job: number, file: Uint8Array | StoredFile): CheckVerdict
  rows(job: number, from: number, to: number): ImportRow[]
  emails(job: number, from: number, to: number): string[]
  /** How many of the file's emails the account has no contact with, on the worker's connection. */
  countNew(job: number, accountId: string): number
  /** Writes a slice of the rows on the worker's connection. */
  write(job: number, slice: WorkerSlice): SliceResult
  /** A page of the account's CSV export, read on the worker's connection. */
  exportPage(accountId: string, afterId: string | undefined): ExportPage
  /** The job is over or stopped: its rows are dropped. */
  release(job: number): void
}

export type WorkerCall = {
  [Name in keyof WorkerCalls]: { id: number; name: Name; args: Parameters<WorkerCalls[Name]> }
}[keyof WorkerCalls]

export type WorkerReply =
  | { id: number; result: unknown }
  /** The call failed (a database error keeps its code, e.g. SQLITE_BUSY). */
  | { id: number; error: { message: string; code: string | undefined } }
  | { id: number; progress: { checked: number; total: number } }

/** A good file, checked and held by the worker until close(). */
export interface CheckedFile {
  total: number
  rows(from: number, to: number): Promise<ImportRow[]>
  emails(from: number, to: number): Promise<string[]>
  countNew(accountId: string): Promise<number>
  write(slice: WorkerSlice): Promise<SliceResult>
  /** The worker forgets the rows. */
  close(): void
}

/** A bad file: its first problems (IMPORT_PROBLEMS_KEPT at most, cut in the worker) and their count. */
export type FileCheck = { ok: true; file: CheckedFile } | { ok: false; errors: ImportError[]; count: number }

export interface ImportChecker {
  /**
   * The worker has a connection of its own to the SQLite file: it reads stored uploads, counts new
   * emails, writes rows and reads export pages there. Otherwise the job and the export do those.
   */
  readonly ownConnection: boolean
  /**
   * Checks the file on the worker thread. `onProgress` hears the rows checked; its calls are
   * serialized, and a report that arrives while one runs replaces any older one still waiting.
   * Rejects with the signal's reason when it aborts.
   */
  check(
    file: Uint8Array | StoredFile,
    onProgress: (checked: number, total: number) => Promise<void>,
    signal: AbortSignal,
  ): Promise<FileCheck>
  exportPage(accountId: string, afterId: string | undefined): Promise<ExportPage>
  /** Ends the worker (the runner's close); calls still waiting fail, and no new one starts. */
  close(): Promise<void>
  /** The worker's thread id while it runs, for tests. */
  readonly threadId: number | undefined
}

/** A worker without a call for this long is ended (its heap given back). */
const IDLE_MS = 30_000

/**
 * Under tsx or vitest this module is TypeScript source and so is the worker next to it, which then
 * needs tsx's loader (a worker thread does not inherit the parent's module hooks).
 */
function startWorker(workerData: WorkerOptions): Worker {
  const fromSource = import.meta.url.endsWith('.ts')
  const url = new URL(`./import-check.worker.${fromSource ? 'ts' : 'js'}`, import.meta.url)
  return new Worker(url, { workerData, ...(fromSource ? { execArgv: ['--import', 'tsx'] } : {}) })
}

interface Pending {
  resolve(result: unknown): void
  reject(error: unknown): void
  progress?(checked: number, total: number): void
  thread: Worker
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
  let closed = false
  const pending = new Map<number, Pending>()
  /** Jobs holding rows on the worker: while any does, it stays. */
  const held = new Set<number>()
  let nextId = 0
  let nextJob = 0
  /** The write slice in the worker, if any: the next one is sent once it has been answered. */
  let writing: Promise<unknown> = Promise.resolve()

  function ensureWorker(): Worker {
    if (closed) {
      throw new Error('the import worker was closed (the process is stopping)')
    }
    clearTimeout(idleTimer)
    if (worker) {
      return worker
    }
    const started = startWorker({ database })
    started.on('message', (reply: WorkerReply) => {
      const call = pending.get(reply.id)
      if (!call) {
        return
      }
      if ('progress' in reply) {
        call.progress?.(reply.progress.checked, reply.progress.total)
        return
      }
      pending.delete(reply.id)
      if ('error' in reply) {
        call.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }))
      } else {
        call.resolve(reply.result)
      }
      idle()
    })
    // A lost worker fails only the calls made to it.
    const lost = (error: unknown) => {
      if (worker === started) {
        worker = undefined
      }
      for (const [id, call] of pending) {
        if (call.thread === started) {
          pending.delete(id)
          call.reject(error)
        }
      }
    }
    started.on('error', lost)
    started.on('exit', (code) => lost(new Error(`the import worker exited (code ${code})`)))
    worker = started
    return started
  }

  /** With nothing asked and no rows held, the worker may end after IDLE_MS; it keeps no process alive. */
  function idle(): void {
    if (pending.size > 0 || held.size > 0 || !worker) {
      return
    }
    const idleWorker = worker
    idleWorker.unref()
    idleTimer = setTimeout(() => {
      if (worker === idleWorker && pending.size === 0 && held.size === 0) {
        worker = undefined
        void idleWorker.terminate()
      }
    }, idleMs)
    idleTimer.unref()
  }

  function call<Name extends keyof WorkerCalls>(
    name: Name,
    args: Parameters<WorkerCalls[Name]>,
    progress?: Pending['progress'],
  ): Promise<ReturnType<WorkerCalls[Name]>> {
    return new Promise((resolve, reject) => {
      const thread = ensureWorker()
      thread.ref()
      const id = nextId++
      pending.set(id, { resolve: resolve as Pending['resolve'], reject, thread, ...(progress ? { progress } : {}) })
      // A file's bytes are copied to the worker: the caller's buffer may be a view the driver owns.
      thread.postMessage({ id, name, args } as WorkerCall)
    })
  }

  const release = (job: number) => {
    if (held.delete(job) && worker) {
      worker.postMessage({ id: nextId++, name: 'release', args: [job] } satisfies WorkerCall)
      idle()
    }
  }

  async function check(
    file: Uint8Array | StoredFile,
    onProgress: (checked: number, total: number) => Promise<void>,
    signal: AbortSignal,
  ): Promise<FileCheck> {
    signal.throwIfAborted()
    const job = nextJob++
    held.add(job)
    let progressing: Promise<void> = Promise.resolve()
    let latest: { checked: number; total: number } | undefined
    const report = () => {
      const next = latest
      latest = undefined
      return next ? onProgress(next.checked, next.total) : Promise.resolve()
    }
    let onAbort = () => {}
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason)
      signal.addEventListener('abort', onAbort, { once: true })
    })
    let verdict: CheckVerdict
    try {
      verdict = await Promise.race([
        call('check', [job, file], (checked, total) => {
          latest = { checked, total }
          progressing = progressing.then(report)
        }),
        aborted,
      ])
      await progressing
    } catch (error) {
      progressing.catch(() => {})
      release(job)
      throw error
    } finally {
      // From here a stop does not cut the job's calls short: a write slice the worker may already be
      // running would commit after the job let go of its lease. The job checks its signal instead.
      signal.removeEventListener('abort', onAbort)
      aborted.catch(() => {})
    }
    if (!verdict.ok) {
      // The worker kept nothing of a bad file.
      held.delete(job)
      idle()
      return verdict
    }
    return {
      ok: true,
      file: {
        total: verdict.total,
        rows: (from, to) => call('rows', [job, from, to]),
        emails: (from, to) => call('emails', [job, from, to]),
        countNew: (accountId) => call('countNew', [job, accountId]),
        write(slice) {
          // One slice at a time in the worker, whatever the number of jobs: the serving connection's
          // writes then wait for one slice's commit at most, not for a queue of them.
          const written = writing.then(() => call('write', [job, slice]))
          writing = written.catch(() => {})
          return written
        },
        close: () => release(job),
      },
    }
  }

  return {
    ownConnection: database !== undefined,
    check,
    exportPage: (accountId, afterId) => call('exportPage', [accountId, afterId]),
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
