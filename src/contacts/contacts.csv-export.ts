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
 * Contacts per page, one slice of the event loop between two yields. On SQLite the page is read
 * synchronously, so the slice is the read, the parse and the CSV writing together: per page of 200
 * it took 1.3–1.7 ms of CPU at the median and up to 2.3–10.6 ms, per page of 50 0.3–0.4 ms and up
 * to 3.9–4.1 ms, at the same CPU per row (6.6–11.4 against 7.9–9.3 µs: noise at a load average of
 * 15; 30,000 contacts, docs/csv-import.md).
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
 * Every contact of the account as CSV, in creation order, read a page at a time by `readPage`:
 * readExportPage on the serving connection, or on an SQLite file the import's worker thread on its
 * own (src/imports/import-check.ts). A pull stream: the next page is read only when the reply has
 * sent the previous one, so memory stays constant. It yields to the event loop after each page: on
 * SQLite a page read here is synchronous, and a reader as fast as the loopback never makes the
 * socket push back, so without the yield a 20,000-contact export held the loop for 1.7–2 s
 * (bench/import-neighbour.ts).
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
