// A deliberately simple in-memory model of one account's contacts and events, written from the
// contract (docs/design.md#contacts, docs/design.md#pagination, docs/api-decisions.md) rather than from src/, for the property tests.
// It predicts every response: the contact bodies, the errors, the list pages and the event feed.

export type CustomValue = string | number | boolean

export interface ContactInput {
  email?: string | null
  first_name?: string | null
  last_name?: string | null
  phone?: string | null
  company?: string | null
  job_title?: string | null
  tags?: string[] | null
  custom_fields?: Record<string, CustomValue | null> | null
}

export interface ModelContact {
  object: 'contact'
  id: string
  email: string | null
  first_name: string | null
  last_name: string | null
  phone: string | null
  company: string | null
  job_title: string | null
  tags: string[]
  custom_fields: Record<string, CustomValue>
  created_at: string
  updated_at: string
  /** The model's accounts use live keys. */
  livemode: true
}

export type EventType = 'contact.created' | 'contact.updated' | 'contact.deleted'

export interface ModelEvent {
  type: EventType
  created_at: string
  object: ModelContact
}

export interface ListFilters {
  email?: string
  tag?: string
  q?: string
  updated_after?: string
  order?: 'asc' | 'desc'
}

/** A predicted failure: the status and problem code the API must answer with. */
export interface Failure {
  status: number
  code: string
  existingId?: string
}

/** The email pool of each account: disjoint domains, so a leak is visible as text. */
export const accountDomain = (who: 'a' | 'b'): string => `${who}.example`

/** Phone inputs and their E.164 form (null: refused). The model knows them by table, not by library. */
export const PHONES: Record<string, string | null> = {
  '+441632960961': '+441632960961',
  '+44 1632 960961': '+441632960961',
  '+1 202 555 0143': '+12025550143',
  '(+1) 202-555-0199': '+12025550199',
  '+33 1 23 45 67 89': '+33123456789',
  '+81-3-1234-5678': '+81312345678',
  '12345': null,
  '+1': null,
  '+1 650 253 0000 ext. 123': null,
}

/** Email inputs the API must refuse (every generated email not listed here is valid). */
export const INVALID_EMAILS = new Set(['not-an-email', 'a b@c.example', 'ada@', '@c.example', 'x@y'])

export const CUSTOM_FIELDS_MAX = 50

const TEXT_FIELDS = ['first_name', 'last_name', 'company', 'job_title'] as const

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T

/** Deep equality where object key order does not matter and array order does. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameValue(item, b[i]))
  }
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const ka = Object.keys(a)
    const kb = Object.keys(b)
    return (
      ka.length === kb.length &&
      ka.every(
        (key) =>
          Object.hasOwn(b, key) && sameValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]),
      )
    )
  }
  return Object.is(a, b) || a === b
}

/**
 * Merge semantics: absent unchanged, null clears, tags a set in first-seen order, custom_fields
 * merged per key (null deletes), at most 50 keys, and at least one of email, phone, first_name,
 * last_name. Returns the merged contact (timestamps untouched) or the 400 it must cause.
 */
export function merge(base: ModelContact, input: ContactInput): ModelContact | Failure {
  const next = clone(base)
  const invalid: Failure = { status: 400, code: 'invalid_parameter' }
  let bad = false
  if (input.email !== undefined) {
    if (input.email === null) {
      next.email = null
    } else {
      const trimmed = input.email.trim()
      bad ||= INVALID_EMAILS.has(trimmed) || trimmed === ''
      next.email = trimmed
    }
  }
  if (input.phone !== undefined) {
    if (input.phone === null) {
      next.phone = null
    } else {
      const normalized = PHONES[input.phone]
      if (normalized === undefined) {
        throw new Error(`the model does not know the phone ${JSON.stringify(input.phone)}`)
      }
      bad ||= normalized === null
      next.phone = normalized
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
    const fields = new Map(Object.entries(next.custom_fields))
    for (const [key, value] of Object.entries(input.custom_fields)) {
      if (value === null) {
        fields.delete(key)
      } else {
        fields.set(key, value)
      }
    }
    bad ||= fields.size > CUSTOM_FIELDS_MAX
    next.custom_fields = Object.fromEntries(fields)
  }
  bad ||= next.email === null && next.phone === null && next.first_name === null && next.last_name === null
  return bad ? invalid : next
}

/** An input the request schema refuses before the request runs: an email that is not one (`format: email`). */
export function refusedBySchema(input: ContactInput): boolean {
  const email = typeof input.email === 'string' ? input.email.trim() : undefined
  return email !== undefined && (email === '' || INVALID_EMAILS.has(email))
}

export const isFailure = (value: unknown): value is Failure =>
  typeof value === 'object' && value !== null && 'status' in value && 'code' in value

const emptyContact = (id: string, now: string): ModelContact => ({
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
  livemode: true,
})

const searchable = (value: string): string => value.normalize('NFC').toLowerCase().replace(/\s+/g, ' ')

export function matches(contact: ModelContact, filters: ListFilters): boolean {
  if (filters.email !== undefined && contact.email?.toLowerCase() !== filters.email.trim().toLowerCase()) {
    return false
  }
  if (filters.tag !== undefined && !contact.tags.includes(filters.tag)) {
    return false
  }
  if (filters.q !== undefined) {
    const q = searchable(filters.q)
    const values = [contact.email, contact.first_name, contact.last_name, contact.company]
    if (!values.some((value) => value !== null && searchable(value).startsWith(q))) {
      return false
    }
  }
  if (filters.updated_after !== undefined && !(contact.updated_at > new Date(filters.updated_after).toISOString())) {
    return false
  }
  return true
}

/** One account's state: the live contacts, every id it ever had, and its event feed. */
export class AccountModel {
  readonly contacts = new Map<string, ModelContact>()
  /** Every contact id this account was ever given (deleted ones too): targets for 404s. */
  readonly knownIds: string[] = []
  readonly events: ModelEvent[] = []

  byEmail(email: string): ModelContact | undefined {
    const lower = email.trim().toLowerCase()
    return [...this.contacts.values()].find((c) => c.email !== null && c.email.toLowerCase() === lower)
  }

  /** POST /contacts: the failure, or a function that records the contact under the id the API gave it. */
  create(input: ContactInput, now: string): Failure | ((id: string) => ModelContact) {
    const merged = merge(emptyContact('', now), input)
    if (isFailure(merged)) {
      return merged
    }
    const taken = merged.email === null ? undefined : this.byEmail(merged.email)
    if (taken) {
      return { status: 409, code: 'contact_exists', existingId: taken.id }
    }
    return (id) => {
      const contact = { ...merged, id }
      this.contacts.set(id, contact)
      this.knownIds.push(id)
      this.events.push({ type: 'contact.created', created_at: now, object: clone(contact) })
      return contact
    }
  }

  /** PATCH /contacts/{id}: the contact after the change (unchanged when nothing differs), or the failure. */
  update(id: string, input: ContactInput, now: string): ModelContact | Failure {
    // The body's schema is checked before the contact is looked up: a bad email is a 400 for any id.
    if (refusedBySchema(input)) {
      return { status: 400, code: 'invalid_parameter' }
    }
    const current = this.contacts.get(id)
    if (!current) {
      return { status: 404, code: 'not_found' }
    }
    const merged = merge(current, input)
    if (isFailure(merged)) {
      return merged
    }
    if (sameValue(merged, current)) {
      return current
    }
    const taken = merged.email === null ? undefined : this.byEmail(merged.email)
    if (taken && taken.id !== id) {
      return { status: 409, code: 'contact_exists', existingId: taken.id }
    }
    const updated = { ...merged, updated_at: now }
    this.contacts.set(id, updated)
    this.events.push({ type: 'contact.updated', created_at: now, object: clone(updated) })
    return updated
  }

  /** POST /contacts/upsert: by email, an update (200) or a create (201). */
  upsert(
    input: ContactInput & { email: string },
    now: string,
  ): Failure | { status: 200; contact: ModelContact } | { status: 201; record: (id: string) => ModelContact } {
    const existing = this.byEmail(input.email)
    if (existing) {
      const updated = this.update(existing.id, input, now)
      return isFailure(updated) ? updated : { status: 200, contact: updated }
    }
    const created = this.create(input, now)
    return isFailure(created) ? created : { status: 201, record: created }
  }

  delete(id: string, now: string): boolean {
    const current = this.contacts.get(id)
    if (!current) {
      return false
    }
    this.contacts.delete(id)
    this.events.push({ type: 'contact.deleted', created_at: now, object: clone(current) })
    return true
  }

  list(filters: ListFilters): ModelContact[] {
    const sorted = [...this.contacts.values()].filter((c) => matches(c, filters)).sort((a, b) => compare(a.id, b.id))
    return filters.order === 'desc' ? sorted.reverse() : sorted
  }

  eventList(type: EventType | undefined): ModelEvent[] {
    return this.events.filter((e) => type === undefined || e.type === type)
  }
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)
