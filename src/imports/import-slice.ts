// One write transaction of a CSV import job: the contact service's importSlice, with the job's
// progress moved on in the same transaction behind a fence (rows_written), so that a job taken over
// by another runner writes nothing twice. On an SQLite file the worker thread runs it on its own
// connection (import-check.worker.ts), otherwise the job does (import-job.ts).
import { tenantById } from '../accounts/tenant.js'
import type { ContactService } from '../contacts/contact-service.js'
import { ruleErrors } from '../contacts/contacts.messages.js'
import { AppError } from '../http/errors.js'
import type { ImportError, ImportRow } from './import-csv.js'
import { updateImport } from './imports.store.js'

export interface ImportSummary {
  created: number
  updated: number
  /** Rows that matched a contact and changed nothing (no event). */
  unchanged: number
}

export interface SliceRequest {
  /** The tenant whose job it is (its `account_id`). */
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
  /** How long the transaction may take rows: the "few milliseconds" of docs/tenant-isolation.md. */
  sliceMs: number
}

export type SliceResult =
  | { type: 'written'; end: number; summary: ImportSummary }
  /** The job's rows_written was not `from`: another runner took the job over. Nothing written. */
  | { type: 'taken' }
  /** A row the merge with the stored contact made invalid (spreadsheet numbering). Nothing written. */
  | { type: 'invalid'; errors: ImportError[] }

export async function writeSlice(contacts: ContactService, request: SliceRequest): Promise<SliceResult> {
  const { accountId, importId, from, rows, counts, at, lease, sliceMs } = request
  try {
    const written = await contacts.importSlice(tenantById(accountId), {
      rows,
      sliceMs,
      now: at,
      inTransaction: async (trx, slice) => {
        const moved = await updateImport(
          trx,
          accountId,
          importId,
          {
            rows_written: from + slice.written,
            created: counts.created + slice.created,
            updated: counts.updated + slice.updated,
            unchanged: counts.unchanged + slice.unchanged,
            lease_expires_at: lease,
            updated_at: at,
          },
          from,
        )
        if (!moved) {
          throw new SliceTaken()
        }
      },
    })
    const { created, updated, unchanged } = written
    return { type: 'written', end: from + written.written, summary: { created, updated, unchanged } }
  } catch (error) {
    if (error instanceof SliceTaken) {
      return { type: 'taken' }
    }
    const described = ruleErrors(error)
    if (described) {
      const index = error instanceof AppError ? Number(error.options.extensions?.row) : Number.NaN
      // Spreadsheet numbering: the header is row 1.
      const row = Number.isNaN(index) ? 0 : from + index + 2
      return { type: 'invalid', errors: described.map((e) => ({ row, ...e })) }
    }
    throw error
  }
}

/** Rolls the slice back when the fence finds the job moved on by another runner. */
class SliceTaken extends Error {}
