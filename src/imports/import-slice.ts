// One write transaction of a CSV import job: rows upserted until it has run `sliceMs`, with the
// job's progress moved on in the same transaction. The job runs it on its own connection
// (import-job.ts) or, on an SQLite file, asks the check's worker thread to run it on the worker's
// connection (import-check.worker.ts), so that the writes' CPU, their commits' WAL checkpoints and
// their garbage stay off the event loop that serves requests (docs/tenant-isolation.md).
import type { Kysely } from 'kysely'
import type { ImportError, ImportRow } from '../contacts/contacts.csv-import.js'
import { type ImportSummary, importContacts } from '../contacts/contacts.import.js'
import { ruleErrors } from '../contacts/contacts.messages.js'
import { retryOnConflict } from '../contacts/contacts.store.js'
import type { Database } from '../db/schema.js'
import { AppError } from '../http/errors.js'
import { updateImport } from './imports.store.js'

/** Rows upserted per importContacts call (one email lookup each) inside a write transaction. */
const WRITE_BATCH_ROWS = 10

export interface SliceRequest {
  accountId: string
  importId: string
  /** The job's rows_written: the first row of `rows`, and the fence on the job's row. */
  from: number
  /** Rows from `from` on; the slice writes a prefix of them (at least one). */
  rows: ImportRow[]
  /** The job's counts so far, moved on by this slice's. */
  counts: ImportSummary
  /** updated_at and the contacts' timestamps. */
  at: string
  lease: string
  /** How long the transaction may take batches: the "few milliseconds" of DESIGN §10. */
  sliceMs: number
}

export type SliceResult =
  | { type: 'written'; end: number; summary: ImportSummary }
  /** The job's rows_written was not `from`: another runner took the job over. Nothing written. */
  | { type: 'taken' }
  /** A row the merge with the stored contact made invalid (spreadsheet numbering). Nothing written. */
  | { type: 'invalid'; errors: ImportError[] }

export async function writeSlice(db: Kysely<Database>, request: SliceRequest): Promise<SliceResult> {
  const { accountId, importId, from, rows, counts, at, lease, sliceMs } = request
  let batchFrom = from
  try {
    return await retryOnConflict(
      db,
      async (trx): Promise<SliceResult> => {
        const started = performance.now()
        const summary: ImportSummary = { created: 0, updated: 0, unchanged: 0 }
        const last = from + rows.length
        let end = from
        // Batches until the transaction has run sliceMs: on SQLite it holds the database (and, the
        // driver being synchronous, its thread) meanwhile, so its length is bounded in time.
        while (end < last && (end === from || performance.now() - started < sliceMs)) {
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
          importId,
          {
            rows_written: end,
            created: counts.created + summary.created,
            updated: counts.updated + summary.updated,
            unchanged: counts.unchanged + summary.unchanged,
            lease_expires_at: lease,
            updated_at: at,
          },
          from,
        )
        if (!moved) {
          throw new SliceTaken()
        }
        return { type: 'written', end, summary }
      },
      'The contacts are being changed by other requests.',
    )
  } catch (error) {
    if (error instanceof SliceTaken) {
      return { type: 'taken' }
    }
    const described = ruleErrors(error)
    if (described) {
      const index = error instanceof AppError ? Number(error.options.extensions?.row) : Number.NaN
      const row = Number.isNaN(index) ? 0 : batchFrom + index + 2
      return { type: 'invalid', errors: described.map((e) => ({ row, ...e })) }
    }
    throw error
  }
}

/** Rolls the slice back when the fence finds the job moved on by another runner. */
class SliceTaken extends Error {}
