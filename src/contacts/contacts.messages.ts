// Contact inputs checked with the API's own TypeBox schemas and contact rules (one source of truth),
// their failures turned into messages that say what to fix: for the web form and the CSV import.
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors'
import { AppError, type FieldError } from '../http/errors.js'
import { applyContactInput, emptyContact } from './contacts.js'
import { type ContactInput, ContactInputSchema, UpsertContactSchema } from './contacts.schemas.js'

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
    case ValueErrorType.StringPattern:
      // Text's only pattern is "not blank".
      return { field, message: top === 'tags' ? 'Remove the blank tag.' : 'Enter a value or leave it empty.' }
    case ValueErrorType.StringFormat:
      // The only format a contact input has is the email's.
      return describeRule({ field, message: 'is not a valid email address' })
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
function schemaErrors(input: unknown, schema: 'input' | 'upsert' = 'input'): FieldError[] {
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
    applyContactInput(emptyContact('con_check', now, true), input, now)
    return []
  } catch (error) {
    const described = ruleErrors(error)
    if (described) {
      return described
    }
    throw error
  }
}
