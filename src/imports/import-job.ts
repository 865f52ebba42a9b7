// One CSV import job, run by the import runner: check the whole file first, on a worker thread
// (import-check.ts; nothing is written if any row is bad), then write it in short transactions, each with its rows' events and the
// job's progress, so other tenants' requests run between them (DESIGN §10).
//
// A crash mid-write leaves *everything*, not nothing: the job stays `writing`, its lease runs
// out, and a runner (this process after a restart, or another instance) resumes it from
// `rows_written`, which each chunk's transaction moved on with its rows. Every row is written
// exactly once (the fence in updateImport), so no event is repeated; rows are upserts by email,
// so what was already written is not written again.
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Kysely } from 'kysely'
import { contactCount } from '../contacts/contact-count.js'
import { IMPORT_PROBLEMS_KEPT, type ImportError, type ImportRow } from '../contacts/contacts.csv-import.js'
import { countNewEmails, type ImportSummary, importContacts } from '../contacts/contacts.import.js'
import { ruleErrors } from '../contacts/contacts.messages.js'
import { retryOnConflict } from '../contacts/contacts.store.js'
import type { Database } from '../db/schema.js'
import { AppError } from '../http/errors.js'
import type { Clock } from '../lib/clock.js'
import type { CheckedFile, FileCheck, ImportChecker } from './import-check.js'
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
  clock: Clock
  maxContactsPerAccount: number
  leaseMs: number
  /** Rows per write transaction (tests make it small to stop a job mid-write). */
  chunkRows: number
  /** Checks the file on a worker thread (import-check.ts). */
  checker: ImportChecker
}

/**
 * A write transaction's length: on SQLite it holds the one connection (and, the driver being
 * synchronous, the event loop) until it commits, so it takes batches of WRITE_BATCH_ROWS until it
 * has run this long (the "few milliseconds" of DESIGN §10), and at most WRITE_CHUNK_ROWS rows.
 * 2 ms, not 4: another tenant's list p99 while a 10,000-row import wrote on SQLite went from
 * 21.5-26.8 ms to 12.7-14.2 ms (idle 2.8-3.3), the import from 1.5-1.9 s to 1.7-2.0 s
 * (bench/import-neighbour.ts; 1 ms bought no more: 12.3-12.6 ms, 2.0-2.3 s).
 */
const WRITE_SLICE_MS = 2
/** Rows upserted per importContacts call (one email lookup each) inside a write transaction. */
const WRITE_BATCH_ROWS = 10
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
  const file = await readImportFile(db, accountId, id)
  const now = () => clock.now().toISOString()
  const lease = () => new Date(clock.now().getTime() + deps.leaseMs).toISOString()
  const update = (change: ImportChange) => updateImport(db, accountId, id, { ...change, updated_at: now() })
  const fail = async (errors: ImportError[], count = errors.length) => {
    await update({
      state: 'failed',
      error_count: count,
      errors: JSON.stringify(errors.slice(0, IMPORT_PROBLEMS_KEPT)),
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
      file ?? new Uint8Array(),
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
    // Fetched before the transaction: on SQLite it holds the one connection until it commits.
    const rows = await rowsAt(from, Math.min(total, from + deps.chunkRows))
    let batchFrom = from
    let chunk: { summary: ImportSummary; end: number }
    try {
      chunk = await retryOnConflict(
        db,
        async (trx) => {
          const at = now()
          const started = performance.now()
          const summary: ImportSummary = { created: 0, updated: 0, unchanged: 0 }
          const last = from + rows.length
          let end = from
          // Batches until the transaction has run WRITE_SLICE_MS: on SQLite it holds the loop and
          // the database meanwhile, so its length is bounded in time, whatever the rows cost.
          while (end < last && (end === from || performance.now() - started < WRITE_SLICE_MS)) {
            batchFrom = end
            const batch = rows.slice(end - from, Math.min(end + WRITE_BATCH_ROWS, last) - from)
            const done = await importContacts(trx, accountId, batch, at, { replaceCustomFields: true })
            summary.created += done.created
            summary.updated += done.updated
            summary.unchanged += done.unchanged
            end += batch.length
          }
          const moved = await updateImport(
            trx,
            accountId,
            id,
            {
              rows_written: end,
              created: job.created + summary.created,
              updated: job.updated + summary.updated,
              unchanged: job.unchanged + summary.unchanged,
              lease_expires_at: lease(),
              updated_at: at,
            },
            from,
          )
          if (!moved) {
            throw new ImportInterrupted('taken over by another runner')
          }
          return { summary, end }
        },
        'The contacts are being changed by other requests.',
      )
    } catch (error) {
      // A row the merge with the stored contact made invalid: the chunks before it stay written.
      const described = ruleErrors(error)
      if (described) {
        const index = error instanceof AppError ? Number(error.options.extensions?.row) : Number.NaN
        const row = Number.isNaN(index) ? 0 : batchFrom + index + 2
        await fail(described.map((e) => ({ row, ...e })))
        return
      }
      throw error
    }
    job.created += chunk.summary.created
    job.updated += chunk.summary.updated
    job.unchanged += chunk.summary.unchanged
    written = chunk.end
    // Always yield between chunks: each transaction is a slice of its own.
    await nextTurn()
    if (signal.aborted) {
      throw new ImportInterrupted('stopped')
    }
  }
  await update({ state: 'done', lease_expires_at: null, finished_at: now() })
  await deleteImportFile(db, accountId, id)
}

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
  let created = 0
  for (let i = 0; i < checked.total; i += LOOKUP_ROWS) {
    const emails = await checked.emails(i, Math.min(checked.total, i + LOOKUP_ROWS))
    created += await countNewEmails(
      deps.db,
      accountId,
      emails.map((email) => ({ email })),
    )
    await nextTurn()
    if (signal.aborted) {
      throw new ImportInterrupted('stopped')
    }
  }
  // A file that creates nothing is never refused, even in an account above its limit (one lowered
  // by the operator, or passed by concurrent creates on PostgreSQL): updates are always allowed.
  if (created === 0) {
    return undefined
  }
  const count = await contactCount(deps.db, accountId)
  if (count + created <= deps.maxContactsPerAccount) {
    return undefined
  }
  return {
    row: 0,
    field: 'file',
    message: `Nothing was imported: the file would create ${created.toLocaleString('en')} ${created === 1 ? 'contact' : 'contacts'}, and the account has ${count.toLocaleString('en')} of its limit of ${deps.maxContactsPerAccount.toLocaleString('en')}. Delete some contacts or import fewer.`,
  }
}

/** Emails looked up per query while checking the quota (a yield between queries). */
const LOOKUP_ROWS = 500
