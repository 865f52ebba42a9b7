// Contact rules: normalization, the merge of an input into a contact, and the stored row.
import { parsePhoneNumberFromString } from 'libphonenumber-js/max'
import { AppError, type FieldError } from '../http/errors.js'
import { type Contact, type ContactInput, CUSTOM_FIELDS_MAX } from './contacts.schemas.js'
import type { ContactsTable } from './contacts.table.js'

const TEXT_FIELDS = ['first_name', 'last_name', 'company', 'job_title'] as const

// Pragmatic: one @, no spaces or quotes in the local part, a dotted domain of valid labels.
const EMAIL =
  /^[^\s@"(),:;<>[\]\\]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/

export function normalizeEmail(raw: string): string | undefined {
  const email = raw.trim()
  return EMAIL.test(email) && email.length <= 254 ? email : undefined
}

export function normalizePhone(raw: string): string | undefined {
  const parsed = parsePhoneNumberFromString(raw.trim())
  // E.164 has no extension: refuse one rather than drop it silently.
  return parsed?.isPossible() && !parsed.ext ? parsed.number : undefined
}

export const emptyContact = (id: string, now: string): Contact => ({
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
})

/**
 * Applies an input with merge semantics: an absent field is unchanged, null clears it,
 * custom_fields merge per key and a null value deletes the key. Throws invalid_parameter
 * listing every field to fix. Returns the same object when nothing changes.
 */
export function applyContactInput(base: Contact, input: ContactInput, now: string): Contact {
  const errors: FieldError[] = []
  const next: Contact = { ...base, tags: [...base.tags], custom_fields: { ...base.custom_fields } }

  if (input.email !== undefined) {
    next.email = input.email === null ? null : (normalizeEmail(input.email) ?? null)
    if (input.email !== null && next.email === null) {
      errors.push({ field: 'email', message: 'is not a valid email address' })
    }
  }
  if (input.phone !== undefined) {
    next.phone = input.phone === null ? null : (normalizePhone(input.phone) ?? null)
    if (input.phone !== null && next.phone === null) {
      errors.push({
        field: 'phone',
        message: 'is not a valid phone number in international format, e.g. +441632960961',
      })
    }
  }
  for (const field of TEXT_FIELDS) {
    const value = input[field]
    if (value !== undefined) {
      next[field] = value
    }
  }
  if (input.tags !== undefined) {
    next.tags = [...new Set(input.tags ?? [])]
  }
  if (input.custom_fields === null) {
    next.custom_fields = {}
  } else if (input.custom_fields !== undefined) {
    for (const [key, value] of Object.entries(input.custom_fields)) {
      if (value === null) {
        delete next.custom_fields[key]
      } else {
        next.custom_fields[key] = value
      }
    }
    if (Object.keys(next.custom_fields).length > CUSTOM_FIELDS_MAX) {
      errors.push({ field: 'custom_fields', message: `must have at most ${CUSTOM_FIELDS_MAX} keys in all` })
    }
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

/** How `q` and the values it matches are compared: lower-cased, runs of white space as one space. */
export function searchForm(text: string): string {
  return text.toLowerCase().replace(/\s+/g, ' ')
}

/** The distinct values `q` is a prefix match on: email, names and company (DESIGN §7), in search form. */
export function searchTerms(contact: Contact): string[] {
  const searchable = [contact.email, contact.first_name, contact.last_name, contact.company]
  return [...new Set(searchable.filter((value): value is string => value !== null).map(searchForm))]
}

/** The stored row: the body is the contact serialized once; the other columns index it. */
export function toContactRow(accountId: string, contact: Contact): ContactsTable {
  return {
    account_id: accountId,
    id: contact.id,
    email_lower: contact.email?.toLowerCase() ?? null,
    // Each value on its own line, so `LIKE '%\n' || q || '%'` is a prefix match on any of them.
    search: searchTerms(contact)
      .map((term) => `\n${term}`)
      .join(''),
    created_at: contact.created_at,
    updated_at: contact.updated_at,
    body: JSON.stringify(contact),
  }
}
