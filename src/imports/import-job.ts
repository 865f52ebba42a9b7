// One CSV import job, run by the import runner: the whole file checked first on the worker thread
// (import-check.ts; nothing is written if any row is bad), then written in short transactions,
// each with its rows' events and the job's progress, so other tenants' requests run between them.
// A crash mid-write leaves the job `writing`; once its lease runs out a runner resumes it from
// `rows_written`, which each slice moved on with its rows behind a fence: every row once, no event
// repeated (docs/csv-import.md, "A crash mid-write leaves everything").
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Kysely } from 'kysely'
import { tenantById } from '../accounts/tenant.js'
import { contactCount } from '../contacts/contact-count.js'
import type { ContactService } from '../contacts/contact-service.js'
import { countNewEmails } from '../contacts/contacts.store.js'
import type { Database } from '../db/schema.js'
import type { Clock } from '../lib/clock.js'
import type { CheckedFile, FileCheck, ImportChecker, WorkerSlice } from './import-check.js'
import type { ImportError, ImportRow } from './import-csv.js'
import { type SliceResult, writeSlice } from './import-slice.js'
import {
  deleteImportFile,
  findImport,
  type ImportChange,
  type ImportJob,
  readImportFile,
  updateImport,
} from './imports.store.js'

export interface ImportJobDeps {
  db: Kysely<Database>
  /** Writes the rows on the serving connection (when the worker does not, see `checker`). */
  contacts: ContactService
  clock: Clock
  leaseMs: number
  /** Rows per write transaction (tests make it small to stop a job mid-write). */
  chunkRows: number
  /**
   * Checks the file on a worker thread (import-check.ts); with `ownConnection` (an SQLite file) the
   * worker also reads the file, counts the new emails and writes the rows on a connection of its
   * own. Not on PostgreSQL (its writes wait on the server, not the loop) nor for an in-memory
   * database (no other connection can open it).
   */
  checker: ImportChecker
}

/**
 * A write transaction's length (import-slice.ts): on SQLite it holds the database, and the thread
 * that runs it, until it commits. Measured against another tenant's p99 (docs/tenant-isolation.md).
 */
const WRITE_SLICE_MS = 2
/** The most rows one write transaction is given. */
export const WRITE_CHUNK_ROWS = 500

/** The job was stopped (shutdown) or taken over by another runner: leave it as it is. */
export class ImportInterrupted extends Error {}

export async function runImport(
  deps: ImportJobDeps,
  accountId: string,
  id: string,
  signal: AbortSignal,
): Promise<void> {
  const { db, clock } = deps
  const job = await findImport(db, accountId, id)
  if (!job || job.state === 'done' || job.state === 'failed') {
    return
  }
  // On an SQLite file the worker reads the upload on its own connection: its 3-5 MB never pass
  // through the event loop's heap.
  const file = deps.checker.ownConnection
    ? { accountId, importId: id }
    : ((await readImportFile(db, accountId, id)) ?? new Uint8Array())
  const now = () => clock.now().toISOString()
  const lease = () => new Date(clock.now().getTime() + deps.leaseMs).toISOString()
  const update = (change: ImportChange) => updateImport(db, accountId, id, { ...change, updated_at: now() })
  const fail = async (errors: ImportError[], count = errors.length) => {
    await update({
      state: 'failed',
      error_count: count,
      // At most IMPORT_PROBLEMS_KEPT: the check keeps no more, a slice fails on one row's.
      errors: JSON.stringify(errors),
      lease_expires_at: null,
      finished_at: now(),
    })
    await deleteImportFile(db, accountId, id)
  }
  const resuming = job.state === 'writing'
  if (!resuming) {
    await update({ state: 'validating', lease_expires_at: lease() })
  }
  let check: FileCheck
  try {
    check = await deps.checker.check(
      file,
      async (checked, total) => {
        if (!resuming) {
          await update({ rows_validated: checked, rows_total: total, lease_expires_at: lease() })
        }
      },
      signal,
    )
  } catch (error) {
    throw signal.aborted ? new ImportInterrupted('stopped') : error
  }
  if (!check.ok) {
    await fail(check.errors, check.count)
    return
  }
  const checked = check.file
  try {
    await writeRows(deps, accountId, job, checked, signal, { update, fail, now, lease })
  } catch (error) {
    throw signal.aborted && !(error instanceof ImportInterrupted) ? new ImportInterrupted('stopped') : error
  } finally {
    checked.close()
  }
}

interface JobSteps {
  update: (change: ImportChange) => Promise<boolean>
  fail: (errors: ImportError[]) => Promise<void>
  now: () => string
  lease: () => string
}

/** The quota check, then every row from `rows_written` on, in short transactions. */
async function writeRows(
  deps: ImportJobDeps,
  accountId: string,
  job: ImportJob,
  checked: CheckedFile,
  signal: AbortSignal,
  { update, fail, now, lease }: JobSteps,
): Promise<void> {
  const { db } = deps
  const id = job.id
  const total = checked.total
  if (job.state !== 'writing') {
    const quota = await quotaProblem(deps, accountId, checked, signal)
    if (quota) {
      await fail([quota])
      return
    }
    await update({ state: 'writing', rows_total: total, lease_expires_at: lease() })
  }

  // The rows fetched from the worker and not yet written: rows [bufferFrom, bufferFrom + length).
  let buffer: ImportRow[] = []
  let bufferFrom = job.rows_written
  const rowsAt = async (from: number, to: number): Promise<ImportRow[]> => {
    buffer = buffer.slice(from - bufferFrom)
    bufferFrom = from
    const have = from + buffer.length
    if (have < to) {
      buffer.push(...(await checked.rows(have, to)))
    }
    return buffer.slice(0, to - from)
  }

  let written = job.rows_written
  while (written < total) {
    const from = written
    const to = Math.min(total, from + deps.chunkRows)
    const slice = {
      accountId,
      importId: id,
      from,
      counts: { created: job.created, updated: job.updated, unchanged: job.unchanged },
      at: now(),
      lease: lease(),
      sliceMs: WRITE_SLICE_MS,
    }
    // On an SQLite file the worker thread that holds the rows writes them on its own connection;
    // otherwise they are fetched from it and written here.
    const result = deps.checker.ownConnection
      ? await writeOnWorker(checked, { ...slice, to })
      : await writeSlice(deps.contacts, { ...slice, rows: await rowsAt(from, to) })
    if (result.type === 'taken') {
      throw new ImportInterrupted('taken over by another runner')
    }
    if (result.type === 'invalid') {
      // A row the merge with the stored contact made invalid: the slices before it stay written.
      await fail(result.errors)
      return
    }
    job.created += result.summary.created
    job.updated += result.summary.updated
    job.unchanged += result.summary.unchanged
    written = result.end
    // Always yield between slices: each transaction is a slice of its own.
    await nextTurn()
    if (signal.aborted) {
      throw new ImportInterrupted('stopped')
    }
  }
  await update({ state: 'done', lease_expires_at: null, finished_at: now() })
  await deleteImportFile(db, accountId, id)
}

/**
 * A slice written by the worker, tried again when its `begin immediate` waited busy_timeout (5 s)
 * for the write lock in vain (another process, such as the CLI, holding it): nothing of it was
 * written, and the job goes on rather than starting over from the file.
 */
async function writeOnWorker(checked: CheckedFile, slice: WorkerSlice): Promise<SliceResult> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await checked.write(slice)
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || attempt >= BUSY_ATTEMPTS) {
        throw error
      }
    }
  }
}
const BUSY_ATTEMPTS = 3

/**
 * MAX_CONTACTS_PER_ACCOUNT, checked before the first write so that an import over it writes
 * nothing. Contacts created by others while the job writes are not counted here: the account
 * can end over the quota by at most this import's new contacts (docs/csv-import.md).
 */
async function quotaProblem(
  deps: ImportJobDeps,
  accountId: string,
  checked: CheckedFile,
  signal: AbortSignal,
): Promise<ImportError | undefined> {
  const created = await newContactCount(deps, accountId, checked, signal)
  // A file that creates nothing is never refused, even in an account above its limit (one lowered
  // by the operator, or passed by concurrent creates on PostgreSQL): updates are always allowed.
  if (created === 0) {
    return undefined
  }
  const count = await contactCount(deps.db, accountId)
  const max = deps.contacts.quota(tenantById(accountId))
  if (count + created <= max) {
    return undefined
  }
  return {
    row: 0,
    field: 'file',
    message: `Nothing was imported: the file would create ${created.toLocaleString('en')} ${created === 1 ? 'contact' : 'contacts'}, and the account has ${count.toLocaleString('en')} of its limit of ${max.toLocaleString('en')}${tenantById(accountId).livemode ? '' : ' in test mode'}. Delete some contacts or import fewer.`,
  }
}

/** How many contacts the file would create: its emails that no contact of the account has. */
async function newContactCount(
  deps: ImportJobDeps,
  accountId: string,
  checked: CheckedFile,
  signal: AbortSignal,
): Promise<number> {
  if (deps.checker.ownConnection) {
    const created = await checked.countNew(accountId)
    if (signal.aborted) {
      throw new ImportInterrupted('stopped')
    }
    return created
  }
  let created = 0
  for (let i = 0; i < checked.total; i += LOOKUP_ROWS) {
    const emails = await checked.emails(i, Math.min(checked.total, i + LOOKUP_ROWS))
    created += await countNewEmails(deps.db, accountId, emails)
    await nextTurn()
    if (signal.aborted) {
      throw new ImportInterrupted('stopped')
    }
  }
  return created
}

/** Emails looked up per query while checking the quota (a yield between queries). */
const LOOKUP_ROWS = 500
