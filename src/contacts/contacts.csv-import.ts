// The CSV import's parsing: a whole file checked row by row, every problem listed by row and column.
import { CsvError, parse } from 'csv-parse/sync'
import type { FieldError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'
import { CSV_COLUMNS, type CsvColumn, TAG_SEPARATOR } from './contacts.csv-export.js'
import { unguardCell } from './contacts.csv-guard.js'
import { checkContactInput } from './contacts.messages.js'
import type { ContactField, ContactInput } from './contacts.schemas.js'

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
}

export type ParsedImport =
  | { ok: true; rows: Array<ContactInput & { email: string }> }
  | { ok: false; errors: ImportError[] }

const fileError = (message: string): ParsedImport => ({ ok: false, errors: [{ row: 0, field: 'file', message }] })

function decodeUtf8(buffer: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buffer)
  } catch {
    return undefined
  }
}

/**
 * Parses and validates a whole file: the header names known columns and includes email; every
 * row must pass the upsert schema and the contact rules. Either every row is good (ok) or
 * nothing is imported and every problem is listed.
 */
export function parseContactsCsv(buffer: Buffer): ParsedImport {
  if (buffer.length > IMPORT_MAX_BYTES) {
    return fileError(`The file is larger than ${IMPORT_MAX_BYTES / 1024 / 1024} MiB: split it into smaller files.`)
  }
  const text = decodeUtf8(buffer)
  if (text === undefined) {
    return fileError('The file is not UTF-8 text: save it as “CSV UTF-8” and try again.')
  }
  let records: string[][]
  try {
    records = parse(text, {
      bom: true,
      skip_empty_lines: true,
      // Header + the maximum + one, to tell "too many" without reading further.
      to: IMPORT_MAX_ROWS + 2,
    }) as string[][]
  } catch (error) {
    if (error instanceof CsvError) {
      return fileError(`The file is not valid CSV: ${error.message}. Fix the file and import it again.`)
    }
    throw error
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
  const columns = header.map((name) => name.trim().toLowerCase())
  const headerErrors: ImportError[] = []
  columns.forEach((name, i) => {
    if (!(CSV_COLUMNS as readonly string[]).includes(name)) {
      headerErrors.push({
        row: 1,
        field: name || `column ${i + 1}`,
        message: `Rename or remove this column: the known columns are ${CSV_COLUMNS.join(', ')}.`,
      })
    } else if (columns.indexOf(name) !== i) {
      headerErrors.push({ row: 1, field: name, message: 'Remove the second column with this name.' })
    }
  })
  if (!columns.includes('email')) {
    headerErrors.push({
      row: 1,
      field: 'email',
      message: 'Add an email column: the import matches contacts by email.',
    })
  }
  if (headerErrors.length > 0) {
    return { ok: false, errors: headerErrors }
  }
  if (body.length === 0) {
    return fileError('The file has no contacts below its header row.')
  }

  const errors: ImportError[] = []
  const rows: Array<ContactInput & { email: string }> = []
  const firstRowOfEmail = new Map<string, number>()
  body.forEach((record, i) => {
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
      errors.push(...rowErrors.map((e) => ({ row: rowNumber, ...e })))
    } else {
      rows.push(input as ContactInput & { email: string })
    }
  })
  return errors.length > 0 ? { ok: false, errors } : { ok: true, rows }
}

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
