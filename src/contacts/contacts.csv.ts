// Contacts as CSV: the columns, the streamed export, and the parsing and validation of an import.
// Inputs are checked with the API's own TypeBox schemas and contact rules (one source of truth);
// this module only turns their failures into messages that say what to fix.
import { Readable } from 'node:stream'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors'
import { CsvError, parse } from 'csv-parse/sync'
import { stringify } from 'csv-stringify/sync'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { AppError, type FieldError } from '../http/errors.js'
import { applyContactInput, emptyContact } from './contacts.js'
import { type Contact, type ContactInput, ContactInputSchema, UpsertContactSchema } from './contacts.schemas.js'
import { listContactRows } from './contacts.store.js'

export const CSV_COLUMNS = [
  'id',
  'email',
  'first_name',
  'last_name',
  'phone',
  'company',
  'job_title',
  'tags',
  'custom_fields',
  'created_at',
  'updated_at',
] as const
type Column = (typeof CSV_COLUMNS)[number]
/** Exported for reference, ignored on import: they are not writable. */
const IGNORED_COLUMNS = new Set<Column>(['id', 'created_at', 'updated_at'])
const TEXT_COLUMNS = ['email', 'first_name', 'last_name', 'phone', 'company', 'job_title'] as const
export const TAG_SEPARATOR = ';'

export const IMPORT_MAX_BYTES = 5 * 1024 * 1024
export const IMPORT_MAX_ROWS = 10_000
export const EXPORT_PAGE_SIZE = 500

// ---------------------------------------------------------------------------------------------
// Formula injection: a spreadsheet runs a cell that starts with = + - @ (or tab / CR). Such a
// cell is written with a leading single quote. A cell that already starts with quotes followed by
// one of those characters gets one more quote, so the import can always remove exactly one.

const FORMULA_START = /^'*[=+\-@\t\r]/

export const guardCell = (value: string): string => (FORMULA_START.test(value) ? `'${value}` : value)

export const unguardCell = (value: string): string => (/^'+[=+\-@\t\r]/.test(value) ? value.slice(1) : value)

// ---------------------------------------------------------------------------------------------
// Export

export function contactCsvRecord(contact: Contact): string[] {
  const cells: Record<Column, string> = {
    id: contact.id,
    email: contact.email ?? '',
    first_name: contact.first_name ?? '',
    last_name: contact.last_name ?? '',
    phone: contact.phone ?? '',
    company: contact.company ?? '',
    job_title: contact.job_title ?? '',
    tags: contact.tags.join(TAG_SEPARATOR),
    custom_fields: JSON.stringify(contact.custom_fields),
    created_at: contact.created_at,
    updated_at: contact.updated_at,
  }
  return CSV_COLUMNS.map((column) => guardCell(cells[column]))
}

// Any CR or LF is quoted: by default only the whole record delimiter (CRLF) would be.
const toCsv = (records: string[][]): string =>
  stringify(records, { record_delimiter: 'windows', quoted_match: /[\r\n]/ })

/**
 * Every contact of the account as CSV, in creation order. A pull stream: the next keyset page
 * is read only when the reply has sent the previous one, so memory stays constant.
 */
export function exportContactsCsv(db: Kysely<Database>, accountId: string, pageSize = EXPORT_PAGE_SIZE): Readable {
  async function* chunks(): AsyncGenerator<string> {
    yield toCsv([[...CSV_COLUMNS]])
    let afterId: string | undefined
    for (;;) {
      const rows = await listContactRows(db, accountId, { order: 'asc', afterId, fetch: pageSize })
      if (rows.length > 0) {
        yield toCsv(rows.map((row) => contactCsvRecord(JSON.parse(row.body) as Contact)))
      }
      const last = rows[rows.length - 1]
      if (rows.length < pageSize || !last) {
        return
      }
      afterId = last.id
    }
  }
  return Readable.from(chunks(), { objectMode: false })
}

// ---------------------------------------------------------------------------------------------
// Validation with the API's schemas

const checkers = {
  input: TypeCompiler.Compile(ContactInputSchema),
  upsert: TypeCompiler.Compile(UpsertContactSchema),
}

const TYPE_MISMATCH = new Set<ValueErrorType>([
  ValueErrorType.String,
  ValueErrorType.Number,
  ValueErrorType.Integer,
  ValueErrorType.Boolean,
  ValueErrorType.Null,
  ValueErrorType.Object,
  ValueErrorType.Array,
  ValueErrorType.Literal,
])

/** For a union, the errors of the variant the value was meant for (the one its type matches). */
function innermost(error: ValueError): ValueError {
  if (error.type !== ValueErrorType.Union) {
    return error
  }
  for (const variant of error.errors) {
    const errors = [...variant]
    const first = errors[0]
    if (first && !(TYPE_MISMATCH.has(first.type) && first.path === error.path)) {
      return innermost(first)
    }
  }
  return error
}

function describe(raw: ValueError): FieldError {
  const error = innermost(raw)
  const [, top = '', key] = error.path.split('/')
  const schema = error.schema as { maxLength?: number; minLength?: number; maxItems?: number; maxProperties?: number }
  const inCustomFields = top === 'custom_fields' && key !== undefined
  const field = inCustomFields ? `custom_fields.${key}` : top || 'row'
  switch (error.type) {
    case ValueErrorType.StringMaxLength:
      return {
        field,
        message:
          top === 'tags'
            ? `Shorten each tag to at most ${schema.maxLength} characters.`
            : `Shorten it to at most ${schema.maxLength} characters.`,
      }
    case ValueErrorType.StringMinLength:
      return { field, message: top === 'tags' ? 'Remove the empty tag.' : 'Enter a value or leave it empty.' }
    case ValueErrorType.ArrayMaxItems:
      return { field, message: `Use at most ${schema.maxItems} tags.` }
    case ValueErrorType.ObjectMaxProperties:
      return { field, message: `Use at most ${schema.maxProperties} custom fields.` }
    case ValueErrorType.ObjectRequiredProperty:
      return { field, message: 'Enter a value: it is required.' }
    case ValueErrorType.ObjectAdditionalProperties:
      return inCustomFields
        ? { field, message: `Rename the custom field “${key}”: use 1 to 40 letters, digits or underscores.` }
        : { field, message: 'Remove this field: it is not a contact field.' }
    default:
      return inCustomFields
        ? { field, message: 'Use text, a number, true, false or null as the value.' }
        : { field, message: `Fix this value: ${error.message.toLowerCase()}.` }
  }
}

/** The contact rules' messages (contacts.ts) as instructions. */
function describeRule(error: FieldError): FieldError {
  if (error.field === 'email' && error.message.startsWith('or ')) {
    return { field: 'email', message: 'Enter at least one of email, phone, first name or last name.' }
  }
  if (error.field === 'email') {
    return { field: 'email', message: 'Enter a valid email address, like ada@example.com.' }
  }
  if (error.field === 'phone') {
    return {
      field: 'phone',
      message: 'Enter the number in international format without an extension, like +44 1632 960961.',
    }
  }
  return { field: error.field, message: `Fix ${error.field}: it ${error.message}.` }
}

/** At most one error per field: the first says what to fix first. */
function firstPerField(errors: Iterable<FieldError>): FieldError[] {
  const byField = new Map<string, FieldError>()
  for (const error of errors) {
    if (!byField.has(error.field)) {
      byField.set(error.field, error)
    }
  }
  return [...byField.values()]
}

/** Every schema error of an input, at most one per field, as messages that say what to fix. */
export function schemaErrors(input: unknown, schema: 'input' | 'upsert' = 'input'): FieldError[] {
  return firstPerField([...checkers[schema].Errors(input)].map(describe))
}

/** The errors of AppError('invalid_parameter') from the contact rules, as messages that say what to fix. */
export function ruleErrors(error: unknown): FieldError[] | undefined {
  if (error instanceof AppError && error.code === 'invalid_parameter') {
    return firstPerField((error.options.errors ?? [{ field: 'row', message: error.message }]).map(describeRule))
  }
  return undefined
}

/** The schema, then the contact rules (email, phone, at least one identifying field). */
export function checkContactInput(input: ContactInput, schema: 'input' | 'upsert' = 'input'): FieldError[] {
  const errors = schemaErrors(input, schema)
  if (errors.length > 0) {
    return errors
  }
  try {
    const now = new Date(0).toISOString()
    applyContactInput(emptyContact('con_check', now), input, now)
    return []
  } catch (error) {
    const described = ruleErrors(error)
    if (described) {
      return described
    }
    throw error
  }
}

// ---------------------------------------------------------------------------------------------
// Import

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
    const { input, errors: cellErrors } = rowInput(columns as Column[], record)
    const rowErrors = [...cellErrors, ...(cellErrors.length === 0 ? checkContactInput(input, 'upsert') : [])]
    if (rowErrors.length === 0 && typeof input.email === 'string') {
      const key = input.email.trim().toLowerCase()
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
function rowInput(columns: Column[], record: string[]): { input: ContactInput; errors: FieldError[] } {
  const input: Record<string, unknown> = {}
  const errors: FieldError[] = []
  columns.forEach((column, i) => {
    if (IGNORED_COLUMNS.has(column)) {
      return
    }
    const cell = unguardCell(record[i] ?? '')
    if (cell.includes('\u0000')) {
      errors.push({ field: column, message: 'Remove the NUL character (U+0000) from this cell.' })
      return
    }
    const empty = cell.trim() === ''
    if ((TEXT_COLUMNS as readonly string[]).includes(column)) {
      input[column] = empty ? (column === 'email' ? '' : null) : cell
    } else if (column === 'tags') {
      const tags = cell
        .split(TAG_SEPARATOR)
        .map((tag) => tag.trim())
        .filter((tag) => tag !== '')
      input.tags = tags.length > 0 ? tags : null
    } else if (column === 'custom_fields') {
      const parsed = empty ? null : parseCustomFields(cell)
      if (parsed === undefined) {
        errors.push({
          field: 'custom_fields',
          message: 'Write the custom fields as a JSON object, like {"plan":"pro","seats":12}, or leave the cell empty.',
        })
      } else if (parsed !== null && Object.hasOwn(parsed, '__proto__')) {
        errors.push({ field: 'custom_fields.__proto__', message: 'Rename the custom field “__proto__”.' })
      } else if (parsed !== null && !storable(parsed)) {
        // As the API refuses them: PostgreSQL would turn a lone surrogate into U+FFFD, and
        // 1e400 parses to Infinity, which JSON cannot carry back.
        errors.push({
          field: 'custom_fields',
          message:
            'Fix the JSON: text must not contain U+0000 or an unpaired \\u surrogate escape, numbers must be finite.',
        })
      } else {
        input.custom_fields = parsed
      }
    }
  })
  if (input.email === '' || input.email === undefined) {
    errors.push({ field: 'email', message: 'Enter an email: the import matches contacts by email.' })
  }
  return { input: input as ContactInput, errors }
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
