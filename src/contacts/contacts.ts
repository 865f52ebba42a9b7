// Contact rules: normalization, the merge of an input into a contact, the stored rows derived
// from a contact, and the checked parse of a stored one.
import { FormatRegistry } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { parsePhoneNumberFromString } from 'libphonenumber-js/max'
import { AppError, type FieldError } from '../http/errors.js'
import { isRfc3339DateTime } from '../http/schemas.js'
import { emailKey, looksLikeStoredEmail, normalizeEmail } from '../lib/email.js'
import {
  CONTACT_FIELDS,
  type Contact,
  type ContactField,
  type ContactInput,
  ContactSchema,
  CUSTOM_FIELDS_MAX,
} from './contacts.schemas.js'
import type { ContactsTable, ContactTagsTable, ContactTermsTable } from './contacts.table.js'

/**
 * A North American number already in E.164 (+1, an area code 2-9, ten digits): libphonenumber
 * answers it unchanged (contacts.phone.test.ts checks a corpus) after a costly match of every
 * NANPA country's patterns (docs/batch.md). Other input still goes to libphonenumber.
 */
const NANP_E164 = /^\+1[2-9][0-9]{9}$/

export function normalizePhone(raw: string): string | undefined {
  const text = raw.trim()
  if (NANP_E164.test(text)) {
    return text
  }
  const parsed = parsePhoneNumberFromString(text)
  // E.164 has no extension: refuse one rather than drop it silently.
  return parsed?.isPossible() && !parsed.ext ? parsed.number : undefined
}

export const emptyContact = (id: string, now: string, livemode: boolean): Contact => ({
  object: 'contact',
  id,
  email: null,
  first_name: null,
  last_name: null,
  phone: null,
  company: null,
  job_title: null,
  tags: [],
  custom_fields: {},
  created_at: now,
  updated_at: now,
  livemode,
})

/** How one field's input value (null included, undefined excluded) merges into the contact. */
type Merge<F extends ContactField> = (
  current: Contact[F],
  value: Exclude<ContactInput[F], undefined>,
  errors: FieldError[],
) => Contact[F]

/**
 * The merge rule of every writable field: a field added to CONTACT_FIELDS fails to compile here
 * until it has one. Free text is copied as given (the schema bounds it).
 */
const MERGE: { [F in ContactField]: Merge<F> } = {
  email: (_, value, errors) =>
    normalized(value, normalizeEmail, () => errors.push({ field: 'email', message: 'is not a valid email address' })),
  phone: (_, value, errors) =>
    normalized(value, normalizePhone, () =>
      errors.push({
        field: 'phone',
        message: 'is not a valid phone number in international format, e.g. +441632960961',
      }),
    ),
  first_name: (_, value) => value,
  last_name: (_, value) => value,
  company: (_, value) => value,
  job_title: (_, value) => value,
  tags: (_, value) => [...new Set(value ?? [])],
  custom_fields: (current, value, errors) => {
    if (value === null) {
      return {}
    }
    const merged = { ...current }
    for (const [key, item] of Object.entries(value)) {
      if (item === null) {
        delete merged[key]
      } else {
        merged[key] = item
      }
    }
    if (Object.keys(merged).length > CUSTOM_FIELDS_MAX) {
      errors.push({ field: 'custom_fields', message: `must have at most ${CUSTOM_FIELDS_MAX} keys in all` })
    }
    return merged
  },
}

/** null stays null; text is normalized, or null with the error reported when it cannot be. */
function normalized(value: string | null, normalize: (raw: string) => string | undefined, refuse: () => void) {
  if (value === null) {
    return null
  }
  const result = normalize(value)
  if (result === undefined) {
    refuse()
  }
  return result ?? null
}

function mergeField<F extends ContactField>(next: Contact, input: ContactInput, field: F, errors: FieldError[]): void {
  const value = input[field]
  if (value !== undefined) {
    // Checked just above; TypeScript does not narrow an indexed access on a type parameter.
    next[field] = MERGE[field](next[field], value as Exclude<ContactInput[F], undefined>, errors)
  }
}

/**
 * Applies an input with merge semantics: an absent field is unchanged, null clears it,
 * custom_fields merge per key and a null value deletes the key. Throws invalid_parameter
 * listing every field to fix. Returns the same object when nothing changes.
 */
export function applyContactInput(base: Contact, input: ContactInput, now: string): Contact {
  const errors: FieldError[] = []
  const next: Contact = { ...base }
  for (const field of CONTACT_FIELDS) {
    mergeField(next, input, field, errors)
  }
  if (next.email === null && next.phone === null && next.first_name === null && next.last_name === null) {
    errors.push({ field: 'email', message: 'or phone, first_name or last_name is required' })
  }
  if (errors.length > 0) {
    const first = errors[0] as FieldError
    throw new AppError('invalid_parameter', `${first.field} ${first.message}`, { errors })
  }
  if (sameContent(base, next)) {
    return base
  }
  next.updated_at = now
  return next
}

function sameContent(a: Contact, b: Contact): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

/**
 * A contact's writable fields as text to edit, in a form or a CSV row: '' for null, the tags
 * joined with `tagSeparator`, custom_fields as their JSON object.
 */
export function contactFieldsAsText(contact: Contact, tagSeparator: string): Record<ContactField, string> {
  return {
    email: contact.email ?? '',
    first_name: contact.first_name ?? '',
    last_name: contact.last_name ?? '',
    phone: contact.phone ?? '',
    company: contact.company ?? '',
    job_title: contact.job_title ?? '',
    tags: contact.tags.join(tagSeparator),
    custom_fields: JSON.stringify(contact.custom_fields),
  }
}

/**
 * How `q` and the values it matches are compared: in Unicode's composed form (NFC: "Zoë" typed as
 * e + U+0308 finds "Zoë" stored as U+00EB), lower-cased, runs of white space as one space.
 */
export function searchForm(text: string): string {
  return text.normalize('NFC').toLowerCase().replace(/\s+/g, ' ')
}

/**
 * Whether `q` is a prefix match on a field (docs/design.md, "Contacts"): every field must be placed
 * here, so a new one is a compile error until it is decided.
 */
const SEARCHED: Record<ContactField, boolean> = {
  email: true,
  first_name: true,
  last_name: true,
  phone: false,
  company: true,
  job_title: false,
  tags: false,
  custom_fields: false,
}
const SEARCHED_FIELDS = CONTACT_FIELDS.filter((field) => SEARCHED[field])

/** The distinct values `q` is a prefix match on, in search form. */
export function searchTerms(contact: Contact): string[] {
  const terms = new Set<string>()
  for (const field of SEARCHED_FIELDS) {
    const value = contact[field]
    if (typeof value === 'string') {
      terms.add(searchForm(value))
    }
  }
  return [...terms]
}

/** What a contact is stored as: its row, one row per tag, one row per search term. */
export interface ContactRows {
  contact: ContactsTable
  tags: ContactTagsTable[]
  terms: ContactTermsTable[]
}

/**
 * The stored rows of a contact, derived from it by this one function (the store and the bench's
 * seeding both use it): the body is the contact serialized once; the other columns and rows index it.
 */
export function toContactRows(accountId: string, contact: Contact): ContactRows {
  const terms = searchTerms(contact)
  return {
    contact: {
      account_id: accountId,
      id: contact.id,
      email_lower: contact.email === null ? null : emailKey(contact.email),
      // Each value on its own line, so `LIKE '%\n' || q || '%'` is a prefix match on any of them.
      search: terms.map((term) => `\n${term}`).join(''),
      created_at: contact.created_at,
      updated_at: contact.updated_at,
      body: JSON.stringify(contact),
    },
    tags: contact.tags.map((tag) => ({ account_id: accountId, tag, contact_id: contact.id })),
    terms: terms.map((term) => ({ account_id: accountId, term, contact_id: contact.id })),
  }
}

// TypeBox checks a format only when one is registered; stored timestamps are Date#toISOString.
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', isRfc3339DateTime)
}
// TypeBox's `format: email` checks stored contacts as they are read (and the web form's and CSV
// import's input, whose addresses the merge step then holds to normalizeEmail): loose, so a contact
// stored before the address rule tightened still reads. The API's Ajv applies the strict rule.
if (!FormatRegistry.Has('email')) {
  FormatRegistry.Set('email', (value) => looksLikeStoredEmail(value.trim()))
}
const storedContact = TypeCompiler.Compile(ContactSchema)

/**
 * A stored contact body, parsed and checked against ContactSchema: a body that is not a contact
 * (a corrupt or hand-edited row) throws, naming the first problem, instead of flowing on typed.
 */
export function parseStoredContact(body: string): Contact {
  const value: unknown = JSON.parse(body)
  if (!storedContact.Check(value)) {
    const problem = storedContact.Errors(value).First()
    throw new Error(`stored contact is not a valid contact: ${problem?.path || '/'} ${problem?.message ?? ''}`.trim())
  }
  return value
}
