// Storage of CSV import jobs: every function takes the account, except the runner's claim, which
// looks across accounts for the next unfinished job.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { type Kysely, sql } from 'kysely'
import { purgeOlderThan } from '../db/retention.js'
import type { Database } from '../db/schema.js'
import type { Db } from '../db/transaction.js'
import type { ImportError } from './import-csv.js'
import type { ContactImportsTable, ImportState } from './imports.table.js'

/** A job as a page shows it (the file left out). */
export type ImportJob = Omit<ContactImportsTable, 'errors' | 'lease_expires_at'> & { errors: ImportError[] }

// Literal, not bound values: SQLite uses a partial index only when the query's condition is the index's.
const UNFINISHED = sql<boolean>`state in ('queued', 'validating', 'writing')`

export const isFinished = (state: ImportState): boolean => state === 'done' || state === 'failed'

/** The job's row, queued: insert it after its file's parts (writeImportFile), so a runner finds the whole file. */
export async function insertImport(
  db: Db,
  accountId: string,
  job: { id: string; fileName: string; now: string },
): Promise<void> {
  await db
    .insertInto('contact_imports')
    .values({
      account_id: accountId,
      id: job.id,
      state: 'queued',
      file_name: job.fileName,
      rows_total: null,
      rows_validated: 0,
      rows_written: 0,
      created: 0,
      updated: 0,
      unchanged: 0,
      error_count: 0,
      errors: null,
      lease_expires_at: null,
      created_at: job.now,
      updated_at: job.now,
      finished_at: null,
    })
    .execute()
}

/**
 * A file is stored, read and deleted in parts of this size, a statement each with a turn of the
 * event loop between: one statement for a whole upload held the event loop too long on SQLite,
 * where the driver is synchronous (docs/tenant-isolation.md).
 */
export const IMPORT_PART_BYTES = 256 * 1024

/** Stores an upload's bytes for the job `importId` (whose row does not exist yet), part by part. */
export async function writeImportFile(
  db: Db,
  accountId: string,
  importId: string,
  file: Uint8Array,
  now: string,
): Promise<void> {
  for (let part = 0; part * IMPORT_PART_BYTES < file.length; part++) {
    const data = file.subarray(part * IMPORT_PART_BYTES, (part + 1) * IMPORT_PART_BYTES)
    await db
      .insertInto('contact_import_file_parts')
      .values({ account_id: accountId, import_id: importId, part, created_at: now, data })
      .execute()
    await nextTurn()
  }
}

/** The job's file, read part by part; undefined when it has none. */
export async function readImportFile(db: Db, accountId: string, importId: string): Promise<Uint8Array | undefined> {
  const parts: Uint8Array[] = []
  for (;;) {
    const row = await db
      .selectFrom('contact_import_file_parts')
      .select('data')
      .where('account_id', '=', accountId)
      .where('import_id', '=', importId)
      .where('part', '=', parts.length)
      .executeTakeFirst()
    if (!row) {
      break
    }
    parts.push(row.data)
    await nextTurn()
  }
  return parts.length === 0 ? undefined : Buffer.concat(parts)
}

/** A job that ended keeps no file: deleted part by part, last first (a reader stops at the first gap). */
export async function deleteImportFile(db: Db, accountId: string, importId: string): Promise<void> {
  const last = await db
    .selectFrom('contact_import_file_parts')
    .select((eb) => eb.fn.max('part').as('part'))
    .where('account_id', '=', accountId)
    .where('import_id', '=', importId)
    .executeTakeFirst()
  for (let part = last?.part ?? -1; part >= 0; part--) {
    await db
      .deleteFrom('contact_import_file_parts')
      .where('account_id', '=', accountId)
      .where('import_id', '=', importId)
      .where('part', '=', part)
      .execute()
    await nextTurn()
  }
}

/**
 * The account's parts stored before `before`, when it has no unfinished job (the caller checked):
 * left by a process that stopped between an upload's parts and its job's row, or between a job's
 * end and its file's delete. The account's next upload deletes them; the hour keeps them clear of
 * another upload's parts being stored at the same time.
 */
export async function deleteStrayImportParts(db: Db, accountId: string, before: string): Promise<void> {
  await db
    .deleteFrom('contact_import_file_parts')
    .where('account_id', '=', accountId)
    .where('created_at', '<', before)
    .execute()
}

/** The account's unfinished import, if any (at most one: a partial unique index). */
export async function findUnfinishedImportId(db: Db, accountId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contact_imports')
    .select('id')
    .where('account_id', '=', accountId)
    .where(UNFINISHED)
    .executeTakeFirst()
  return row?.id
}

/** Imports the account started since `since` (ISO): what the hourly budget counts. */
export async function countImportsSince(db: Db, accountId: string, since: string): Promise<number> {
  const row = await db
    .selectFrom('contact_imports')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .where('created_at', '>', since)
    .executeTakeFirst()
  return Number(row?.n ?? 0)
}

export async function findImport(db: Db, accountId: string, id: string): Promise<ImportJob | undefined> {
  const row = await db
    .selectFrom('contact_imports')
    .select([
      'account_id',
      'id',
      'state',
      'file_name',
      'rows_total',
      'rows_validated',
      'rows_written',
      'created',
      'updated',
      'unchanged',
      'error_count',
      'errors',
      'created_at',
      'updated_at',
      'finished_at',
    ])
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  if (!row) {
    return undefined
  }
  return { ...row, errors: row.errors === null ? [] : (JSON.parse(row.errors) as ImportError[]) }
}

/**
 * Claims the oldest unfinished job whose lease is free (never taken, released, or its runner
 * gone), for `leaseMs`. The conditional update makes two runners' claims of one job exclusive.
 */
export async function claimNextImport(
  db: Kysely<Database>,
  now: Date,
  leaseMs: number,
): Promise<{ accountId: string; id: string } | undefined> {
  const at = now.toISOString()
  for (let attempt = 0; attempt < 3; attempt++) {
    const next = await db
      .selectFrom('contact_imports')
      .select(['account_id', 'id'])
      .where(UNFINISHED)
      .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', at)]))
      .orderBy('created_at')
      .limit(1)
      .executeTakeFirst()
    if (!next) {
      return undefined
    }
    const claimed = await db
      .updateTable('contact_imports')
      .set({ lease_expires_at: new Date(now.getTime() + leaseMs).toISOString() })
      .where('account_id', '=', next.account_id)
      .where('id', '=', next.id)
      .where(UNFINISHED)
      .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', at)]))
      .executeTakeFirst()
    if (Number(claimed.numUpdatedRows) === 1) {
      return { accountId: next.account_id, id: next.id }
    }
  }
  return undefined
}

/** Lets another runner (or this one after a restart) take the job at once. */
export async function releaseImport(db: Db, accountId: string, id: string): Promise<void> {
  await db
    .updateTable('contact_imports')
    .set({ lease_expires_at: null })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .execute()
}

export type ImportChange = Partial<
  Pick<
    ContactImportsTable,
    | 'state'
    | 'rows_total'
    | 'rows_validated'
    | 'rows_written'
    | 'created'
    | 'updated'
    | 'unchanged'
    | 'error_count'
    | 'errors'
    | 'lease_expires_at'
    | 'finished_at'
  >
>

/**
 * Updates a job this runner holds; `expectWritten` fences a chunk's transaction: when another
 * runner has moved the job on (this one stalled past its lease), nothing is updated and false
 * is returned, so the caller rolls its chunk back instead of writing rows twice.
 */
export async function updateImport(
  db: Db,
  accountId: string,
  id: string,
  change: ImportChange & { updated_at: string },
  expectWritten?: number,
): Promise<boolean> {
  let query = db.updateTable('contact_imports').set(change).where('account_id', '=', accountId).where('id', '=', id)
  if (expectWritten !== undefined) {
    query = query.where('rows_written', '=', expectWritten)
  }
  const result = await query.executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/**
 * Deletes the jobs that finished (done or failed) before `now` minus the retention, in batches
 * (db/retention.ts): their page and problems go with them; unfinished jobs are kept.
 */
export const purgeFinishedImports = (db: Db, now: Date, retentionDays: number, batch?: number): Promise<number> =>
  purgeOlderThan(db, 'contact_imports', now, retentionDays, batch)
