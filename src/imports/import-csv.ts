// The CSV import's file: parsed and checked row by row, every problem listed by row, column and
// value. The import's worker thread runs it (import-check.worker.ts) with a pause that never yields;
// by default it works in short slices (decode, parse, check) with a yield between them.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { CSV_COLUMNS, type CsvColumn, TAG_SEPARATOR } from '../contacts/contacts.csv-export.js'
import { unguardCell } from '../contacts/contacts.csv-guard.js'
import { checkContactInput } from '../contacts/contacts.messages.js'
import type { ContactField, ContactInput } from '../contacts/contacts.schemas.js'
import type { FieldError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'

export const IMPORT_MAX_BYTES = 5 * 1024 * 1024
export const IMPORT_MAX_ROWS = 10_000

/** The writable fields' columns; the others are exported for reference and ignored on import. */
const isFieldColumn = (column: CsvColumn): column is ContactField =>
  column !== 'id' && column !== 'created_at' && column !== 'updated_at'

export interface ImportError {
  /** Spreadsheet numbering: the header is row 1, the first contact row 2. 0 for the whole file. */
  row: number
  field: string
  message: string
  /** The cell as the file has it, cut at PROBLEM_VALUE_MAX characters (absent for a problem of the whole file). */
  value?: string
  /** The cell's whole length, when `value` was cut. */
  valueLength?: number
}

/** Problems kept and reported; the rest are counted. A file of millions of bad cells is 5 MiB of them. */
export const IMPORT_PROBLEMS_KEPT = 200
/** A cell is kept in a problem up to this many characters: the row and column say where the rest is. */
export const PROBLEM_VALUE_MAX = 120
/** More header cells than this is not a contacts file (there are 11 columns): refused as a whole. */
const HEADER_CELLS_MAX = 100

export type ImportRow = ContactInput & { email: string }

/** A failed parse: the first IMPORT_PROBLEMS_KEPT problems, and how many there were in all. */
export type ParsedImport = { ok: true; rows: ImportRow[] } | { ok: false; errors: ImportError[]; count: number }

const fileError = (message: string): ParsedImport => ({
  ok: false,
  errors: [{ row: 0, field: 'file', message }],
  count: 1,
})

/** Collects problems: keeps the first IMPORT_PROBLEMS_KEPT, values cut, and counts them all. */
function problemList() {
  const kept: ImportError[] = []
  let count = 0
  return {
    add(problem: ImportError): void {
      count++
      if (kept.length >= IMPORT_PROBLEMS_KEPT) {
        return
      }
      const { value } = problem
      kept.push(
        value !== undefined && value.length > PROBLEM_VALUE_MAX
          ? { ...problem, value: value.slice(0, PROBLEM_VALUE_MAX), valueLength: value.length }
          : problem,
      )
    },
    get count() {
      return count
    },
    failed: (): ParsedImport => ({ ok: false, errors: kept, count }),
  }
}

/**
 * Bytes handed to the decoder and the parser at a time: about 1 ms of csv-parse work, so a slice
 * and the checks that follow it stay well inside SLICE_MS.
 */
const FEED_BYTES = 32 * 1024
/** The longest stretch of work between two yields to the event loop (docs/design.md#fair-share: a few ms). */
const SLICE_MS = 3

/** Yields to the event loop (other requests' I/O) once SLICE_MS of work has passed since the last yield. */
export function sliceYielder(sliceMs = SLICE_MS): () => Promise<void> {
  let since = performance.now()
  return async () => {
    if (performance.now() - since >= sliceMs) {
      await nextTurn()
      since = performance.now()
    }
  }
}

/** The file's records (header first), read SLICE_MS at a time; a file problem as a ParsedImport. */
async function readRecords(buffer: Uint8Array, pause: () => Promise<void>): Promise<string[][] | ParsedImport> {
  // csv-parse is loaded at the first import, not with the app (RSS: docs/performance.md).
  const { CsvError, parse } = await import('csv-parse')
  const decoder = new TextDecoder('utf-8', { fatal: true })
  // Header + the maximum + one, to tell "too many" without reading further.
  const parser = parse({ bom: true, skip_empty_lines: true, to: IMPORT_MAX_ROWS + 2 })
  const records: string[][] = []
  let failure: unknown
  parser.on('readable', () => {
    for (let record: string[] | null = parser.read(); record !== null; record = parser.read()) {
      records.push(record)
    }
  })
  parser.on('error', (error) => {
    failure ??= error
  })
  const ended = new Promise<void>((resolve) => {
    parser.on('end', resolve)
    parser.on('error', () => resolve())
  })
  try {
    for (let at = 0; at < buffer.length && failure === undefined; at += FEED_BYTES) {
      const end = Math.min(at + FEED_BYTES, buffer.length)
      const text = decoder.decode(buffer.subarray(at, end), { stream: end < buffer.length })
      if (records.length > IMPORT_MAX_ROWS + 1) {
        break
      }
      parser.write(text)
      await pause()
    }
    decoder.decode()
  } catch {
    parser.destroy()
    return fileError('The file is not UTF-8 text: save it as “CSV UTF-8” and try again.')
  }
  parser.end()
  await ended
  if (failure instanceof CsvError) {
    return fileError(`The file is not valid CSV: ${failure.message}. Fix the file and import it again.`)
  }
  if (failure !== undefined) {
    throw failure
  }
  return records
}

/**
 * Parses and validates a whole file: the header names known columns and includes email; every
 * row must pass the upsert schema and the contact rules. Either every row is good (ok) or
 * nothing is imported and every problem is listed. `onProgress` hears the rows checked so far.
 */
export async function parseContactsCsv(
  buffer: Uint8Array,
  onProgress: (rowsChecked: number, rowsTotal: number) => Promise<void> = async () => {},
  pause: () => Promise<void> = sliceYielder(),
): Promise<ParsedImport> {
  if (buffer.length > IMPORT_MAX_BYTES) {
    return fileError(`The file is larger than ${IMPORT_MAX_BYTES / 1024 / 1024} MiB: split it into smaller files.`)
  }
  const records = await readRecords(buffer, pause)
  if (!Array.isArray(records)) {
    return records
  }
  const [header, ...body] = records
  if (!header) {
    return fileError(`The file is empty. The first row must name the columns, e.g. ${CSV_COLUMNS.join(',')}.`)
  }
  if (body.length > IMPORT_MAX_ROWS) {
    return fileError(
      `The file has more than ${IMPORT_MAX_ROWS.toLocaleString('en')} contacts: split it into files of at most ${IMPORT_MAX_ROWS.toLocaleString('en')} rows.`,
    )
  }
  // A column name, not an email: emailKey would say the wrong thing here.
  if (header.length > HEADER_CELLS_MAX) {
    return fileError(
      `The header row has ${header.length.toLocaleString('en')} columns: a contacts file has at most ${CSV_COLUMNS.length} (${CSV_COLUMNS.join(', ')}).`,
    )
  }
  const columns = header.map((name) => name.trim().toLowerCase())
  const headerErrors = problemList()
  columns.forEach((name, i) => {
    if (!(CSV_COLUMNS as readonly string[]).includes(name)) {
      headerErrors.add({
        row: 1,
        field: name || `column ${i + 1}`,
        message: `Rename or remove this column: the known columns are ${CSV_COLUMNS.join(', ')}.`,
        value: header[i] ?? '',
      })
    } else if (columns.indexOf(name) !== i) {
      headerErrors.add({
        row: 1,
        field: name,
        message: 'Remove the second column with this name.',
        value: header[i] ?? '',
      })
    }
  })
  if (!columns.includes('email')) {
    headerErrors.add({
      row: 1,
      field: 'email',
      message: 'Add an email column: the import matches contacts by email.',
    })
  }
  if (headerErrors.count > 0) {
    return headerErrors.failed()
  }
  if (body.length === 0) {
    return fileError('The file has no contacts below its header row.')
  }

  const errors = problemList()
  const rows: ImportRow[] = []
  const firstRowOfEmail = new Map<string, number>()
  const cellOf = (record: string[], field: string): string => {
    const column = field.split(/[.[]/)[0] ?? field
    const i = columns.indexOf(column)
    return i < 0 ? '' : (record[i] ?? '')
  }
  for (const [i, record] of body.entries()) {
    const rowNumber = i + 2
    const { input, errors: cellErrors } = rowInput(columns as CsvColumn[], record)
    const rowErrors = [...cellErrors, ...(cellErrors.length === 0 ? checkContactInput(input, 'upsert') : [])]
    if (rowErrors.length === 0 && typeof input.email === 'string') {
      const key = emailKey(input.email)
      const first = firstRowOfEmail.get(key)
      if (first !== undefined) {
        rowErrors.push({
          field: 'email',
          message: `Remove one of the rows with this email: row ${first} has it too.`,
        })
      } else {
        firstRowOfEmail.set(key, rowNumber)
      }
    }
    if (rowErrors.length > 0) {
      for (const e of rowErrors) {
        errors.add({ row: rowNumber, ...e, value: cellOf(record, e.field) })
      }
    } else {
      rows.push(input as ImportRow)
    }
    if ((i + 1) % PROGRESS_EVERY === 0) {
      await onProgress(i + 1, body.length)
    }
    await pause()
  }
  await onProgress(body.length, body.length)
  return errors.count > 0 ? errors.failed() : { ok: true, rows }
}

/** Rows checked between two progress reports. */
const PROGRESS_EVERY = 1000

/**
 * One record as an input. A column the file has sets the field; an empty cell clears it
 * (custom_fields holds the JSON object of all the contact's custom fields).
 */
function rowInput(columns: CsvColumn[], record: string[]): { input: ContactInput; errors: FieldError[] } {
  const input: Record<string, unknown> = {}
  const errors: FieldError[] = []
  columns.forEach((column, i) => {
    if (!isFieldColumn(column)) {
      return
    }
    const cell = unguardCell(record[i] ?? '')
    if (cell.includes('\u0000')) {
      errors.push({ field: column, message: 'Remove the NUL character (U+0000) from this cell.' })
      return
    }
    const empty = cell.trim() === ''
    switch (column) {
      case 'email':
        input.email = empty ? '' : cell
        break
      case 'first_name':
      case 'last_name':
      case 'phone':
      case 'company':
      case 'job_title':
        input[column] = empty ? null : cell
        break
      case 'tags': {
        const tags = cell
          .split(TAG_SEPARATOR)
          .map((tag) => tag.trim())
          .filter((tag) => tag !== '')
        input.tags = tags.length > 0 ? tags : null
        break
      }
      case 'custom_fields': {
        const parsed = empty ? null : parseCustomFields(cell)
        const problem = parsed === undefined || parsed === null ? undefined : customFieldsProblem(parsed)
        if (parsed === undefined) {
          errors.push({
            field: column,
            message:
              'Write the custom fields as a JSON object, like {"plan":"pro","seats":12}, or leave the cell empty.',
          })
        } else if (problem) {
          errors.push(problem)
        } else {
          input.custom_fields = parsed
        }
        break
      }
      default: {
        // A new writable field must be read here: this fails to compile until it is.
        const unread: never = column
        throw new Error(`unread column ${String(unread)}`)
      }
    }
  })
  if (input.email === '' || input.email === undefined) {
    errors.push({ field: 'email', message: 'Enter an email: the import matches contacts by email.' })
  }
  return { input: input as ContactInput, errors }
}

function customFieldsProblem(parsed: Record<string, unknown>): FieldError | undefined {
  if (Object.hasOwn(parsed, '__proto__')) {
    return { field: 'custom_fields.__proto__', message: 'Rename the custom field “__proto__”.' }
  }
  if (!storable(parsed)) {
    // As the API refuses them: PostgreSQL would turn a lone surrogate into U+FFFD, and
    // 1e400 parses to Infinity, which JSON cannot carry back.
    return {
      field: 'custom_fields',
      message:
        'Fix the JSON: text must not contain U+0000 or an unpaired \\u surrogate escape, numbers must be finite.',
    }
  }
  return undefined
}

/** Custom field keys and values a contact can store (the parsed JSON is one level deep). */
const storable = (fields: Record<string, unknown>): boolean =>
  Object.entries(fields).every(
    ([key, value]) =>
      wellFormed(key) &&
      (typeof value === 'string' ? wellFormed(value) : typeof value !== 'number' || Number.isFinite(value)),
  )

const wellFormed = (text: string): boolean => !text.includes('\u0000') && text.isWellFormed()

function parseCustomFields(cell: string): Record<string, unknown> | null | undefined {
  try {
    const value: unknown = JSON.parse(cell)
    if (value === null || (typeof value === 'object' && !Array.isArray(value))) {
      return value as Record<string, unknown> | null
    }
    return undefined
  } catch {
    return undefined
  }
}
