// Contacts as CSV: the columns (those of the import too) and the streamed export.
import { Readable } from 'node:stream'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { guardCell } from './contacts.csv-guard.js'
import { contactFieldsAsText, parseStoredContact } from './contacts.js'
import { listContactRows } from './contacts.list-query.js'
import { CONTACT_FIELDS, type Contact } from './contacts.schemas.js'

/** The writable fields, between the id and the timestamps, which the import ignores. */
export const CSV_COLUMNS = ['id', ...CONTACT_FIELDS, 'created_at', 'updated_at'] as const
export type CsvColumn = (typeof CSV_COLUMNS)[number]
export const TAG_SEPARATOR = ';'

/**
 * Contacts per page, one slice of the event loop between two yields: on SQLite the read, the parse
 * and the CSV writing of a page run together without a pause (docs/csv-import.md).
 */
const EXPORT_PAGE_SIZE = 50

function contactCsvRecord(contact: Contact): string[] {
  const cells: Record<CsvColumn, string> = {
    id: contact.id,
    ...contactFieldsAsText(contact, TAG_SEPARATOR),
    created_at: contact.created_at,
    updated_at: contact.updated_at,
  }
  return CSV_COLUMNS.map((column) => guardCell(cells[column]))
}

// Any CR or LF is quoted: by default only the whole record delimiter (CRLF) would be.
const csvOptions = { record_delimiter: 'windows', quoted_match: /[\r\n]/ } as const

/** A page of the export: its records as CSV text, and where the next page starts. */
export interface ExportPage {
  csv: string
  /** The page's last contact id, when another page may follow. */
  nextAfter: string | undefined
}

/** Reads the page after `afterId` (from the start when undefined). */
export type ExportPageReader = (afterId: string | undefined) => Promise<ExportPage>

/** The page of `pageSize` contacts after `afterId`, in creation order, on `db`. */
export async function readExportPage(
  db: Kysely<Database>,
  accountId: string,
  afterId: string | undefined,
  pageSize = EXPORT_PAGE_SIZE,
): Promise<ExportPage> {
  // csv-stringify is loaded at the first export, not with the app (RSS: docs/performance.md).
  const { stringify } = await import('csv-stringify/sync')
  // No filter: every row examined is a row of the page, so no page is cut short.
  const { rows } = await listContactRows(db, accountId, { order: 'asc', afterId, fetch: pageSize })
  const records = rows.map((row) => contactCsvRecord(parseStoredContact(row.body)))
  return {
    csv: records.length > 0 ? stringify(records, csvOptions) : '',
    nextAfter: rows.length < pageSize ? undefined : rows[rows.length - 1]?.id,
  }
}

/**
 * Every contact of the account as CSV, in creation order, read a page at a time by `readPage`
 * (readExportPage, here or on the import worker's connection, src/imports/import-check.ts). A pull
 * stream, so memory stays constant; it yields after each page, since on SQLite a read is
 * synchronous and a reader as fast as the loopback never makes the socket push back.
 */
export function exportContactsCsv(readPage: ExportPageReader): Readable {
  async function* chunks(): AsyncGenerator<string> {
    const { stringify } = await import('csv-stringify/sync')
    yield stringify([[...CSV_COLUMNS]], csvOptions)
    let afterId: string | undefined
    do {
      const page = await readPage(afterId)
      if (page.csv !== '') {
        yield page.csv
      }
      afterId = page.nextAfter
      await nextTurn()
    } while (afterId !== undefined)
  }
  return Readable.from(chunks(), { objectMode: false })
}
