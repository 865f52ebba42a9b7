// Tenant-scoped contact storage. Every function takes the account id; every query filters by it.
// Each write records its event in the same transaction.
import { CompiledQuery, type Kysely, sql, type Transaction } from 'kysely'
import { PLAN_PER_CALL } from '../db/database.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import { recordEvent } from '../events/events.js'
import { AppError, invalidParameter } from '../http/errors.js'
import type { PageRow } from '../http/pagination.js'
import { newId } from '../lib/ids.js'
import { applyContactInput, emptyContact, searchForm, searchTerms, toContactRow } from './contacts.js'
import type { Contact, ContactInput, ListContactsFilters } from './contacts.schemas.js'

type Db = Kysely<Database> | Transaction<Database>

export interface StoredContact {
  contact: Contact
  /** The contact serialized, exactly as stored and as sent. */
  body: string
}

export async function findContactBody(db: Db, accountId: string, id: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contacts')
    .select('body')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return row?.body
}

async function findContactIdByEmail(db: Db, accountId: string, email: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contacts')
    .select('id')
    .where('account_id', '=', accountId)
    .where('email_lower', '=', email.trim().toLowerCase())
    .executeTakeFirst()
  return row?.id
}

export interface ListContactsOptions extends ListContactsFilters {
  afterId: string | undefined
  /** Rows to fetch: the page size plus one, to learn whether another page follows. */
  fetch: number
  /** Tests lower it to reach both plans of `q` and `updated_after` with a few contacts. */
  indexedMax?: number
}

/**
 * With `q` or `updated_after`, a page either sorts the few matching contacts, found by an index
 * (contact_terms, or (account_id, updated_at)), or walks the id order skipping the others: the
 * first is right when few match (a rare name; a sync loop asking for the last minute's changes),
 * the second when many do (a common prefix; a first sync), where sorting them all for every page
 * would cost O(n) a page. A probe that reads at most this many + 1 index entries decides, so
 * neither database's planner has to guess.
 */
const INDEXED_MAX = 2000

/**
 * Keyset page by id (creation order): the cost does not grow with depth. A list request is the
 * hottest query of the API, so each combination of filters is built and compiled by Kysely once
 * per database handle and then run with the request's values (SQLite reuses the prepared
 * statement too: db/database.ts).
 */
export async function listContactRows(db: Db, accountId: string, options: ListContactsOptions): Promise<PageRow[]> {
  const indexedMax = options.indexedMax ?? INDEXED_MAX
  const q = options.q === undefined ? undefined : searchForm(options.q)
  const qHigh = q === undefined ? undefined : prefixUpperBound(q)
  const values: Record<ListSlot, unknown> = {
    account: accountId,
    after: options.afterId,
    email: options.email?.trim().toLowerCase(),
    tag: options.tag,
    q: q === undefined ? undefined : likePattern(q),
    qLow: q,
    qHigh,
    updatedAfter: options.updated_after === undefined ? undefined : updatedAfter(options.updated_after),
    fetch: options.fetch,
    indexedMax: indexedMax + 1,
  }
  const shape: ListShape = {
    desc: options.order === 'desc',
    after: options.afterId !== undefined,
    email: options.email !== undefined,
    tag: options.tag !== undefined,
    q: q !== undefined,
    qIndexed: false,
    updatedAfter: options.updated_after !== undefined,
    updatedAfterIndexed: false,
  }
  const fewMatch = async (probeName: 'probeQ' | 'probeUpdated') => {
    const probe = templateFor(db, probeName, () => compileProbe(db, probeName))
    const { rows } = await db.executeQuery<{ n: number | string }>(
      CompiledQuery.raw(probe.sql, parameters(probe, values)),
    )
    return Number(rows[0]?.n ?? 0) <= indexedMax
  }
  // An email matches one contact at most: its own index serves the page whatever else is asked.
  if (shape.q && !shape.email && qHigh !== undefined) {
    shape.qIndexed = await fewMatch('probeQ')
  }
  if (shape.updatedAfter && !shape.qIndexed) {
    shape.updatedAfterIndexed = await fewMatch('probeUpdated')
  }
  const key = Object.values(shape)
    .map((on) => (on ? '1' : '0'))
    .join('')
  const template = templateFor(db, key, () => compileListTemplate(db, shape))
  const { rows } = await db.executeQuery<PageRow>(CompiledQuery.raw(template.sql, parameters(template, values)))
  return rows
}

type ListSlot = 'account' | 'after' | 'email' | 'tag' | 'q' | 'qLow' | 'qHigh' | 'updatedAfter' | 'fetch' | 'indexedMax'
type ListShape = Record<
  'desc' | 'after' | 'email' | 'tag' | 'q' | 'qIndexed' | 'updatedAfter' | 'updatedAfterIndexed',
  boolean
>
interface ListTemplate {
  sql: string
  /** Which value goes in each parameter position. */
  slots: ListSlot[]
}

/** Per database handle (the SQL differs by dialect); a transaction, a new object each time, just misses. */
const listTemplates = new WeakMap<Db, Map<string, ListTemplate>>()

function templateFor(db: Db, key: string, compile: () => ListTemplate): ListTemplate {
  let templates = listTemplates.get(db)
  if (!templates) {
    templates = new Map()
    listTemplates.set(db, templates)
  }
  let template = templates.get(key)
  if (!template) {
    template = compile()
    templates.set(key, template)
  }
  return template
}

const parameters = (template: ListTemplate, values: Record<ListSlot, unknown>) =>
  template.slots.map((slot) => values[slot])

const marker = (slot: ListSlot) => `\u0000${slot}`
const FETCH_MARKER = -424242
const INDEXED_MAX_MARKER = -434343

/** Records which value each parameter position of a query built with markers takes. */
function toTemplate(compiled: { sql: string; parameters: readonly unknown[] }, planPerCall: boolean): ListTemplate {
  const slots = compiled.parameters.map((parameter): ListSlot => {
    if (parameter === FETCH_MARKER) {
      return 'fetch'
    }
    if (parameter === INDEXED_MAX_MARKER) {
      return 'indexedMax'
    }
    const slot = typeof parameter === 'string' && parameter.startsWith('\u0000') ? parameter.slice(1) : undefined
    if (slot === undefined) {
      throw new Error(`list query: unexpected parameter ${String(parameter)}`)
    }
    return slot as ListSlot
  })
  return { sql: planPerCall ? `${compiled.sql} ${PLAN_PER_CALL}` : compiled.sql, slots }
}

/** How many index entries match `q` or `updated_after`, counting no further than INDEXED_MAX + 1. */
function compileProbe(db: Db, probe: 'probeQ' | 'probeUpdated'): ListTemplate {
  const matching =
    probe === 'probeQ'
      ? matchingTerms(db).select('contact_terms.contact_id').limit(INDEXED_MAX_MARKER)
      : db
          .selectFrom('contacts')
          .select('contacts.id')
          .where('contacts.account_id', '=', marker('account'))
          .where('contacts.updated_at', '>', marker('updatedAfter'))
          .limit(INDEXED_MAX_MARKER)
  return toTemplate(sql<{ n: number }>`select count(*) as n from (${matching}) as matching`.compile(db), true)
}

/** The account's search terms that start with `q`: a range of the contact_terms index. */
function matchingTerms(db: Db) {
  return db
    .selectFrom('contact_terms')
    .where('contact_terms.account_id', '=', marker('account'))
    .where('contact_terms.term', '>=', marker('qLow'))
    .where('contact_terms.term', '<', marker('qHigh'))
}

/** `q` (in search form) as a LIKE pattern: a prefix of any line of `search` (see toContactRow). */
function likePattern(q: string): string {
  return `%\n${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

/**
 * The least string above every string that starts with `prefix`, in code-point order (SQLite's
 * and the "C" collation's): the prefix with its last code point below U+10FFFF incremented and the
 * rest dropped. undefined when there is none (only U+10FFFF), which no index range can serve.
 */
export function prefixUpperBound(prefix: string): string | undefined {
  const points = Array.from(prefix, (char) => char.codePointAt(0) ?? 0)
  while (points.length > 0) {
    const last = points.pop() ?? 0
    if (last < 0x10ffff) {
      // Skip the surrogate range, which no well-formed string contains.
      points.push(last === 0xd7ff ? 0xe000 : last + 1)
      return String.fromCodePoint(...points)
    }
  }
  return undefined
}

function updatedAfter(raw: string): string {
  const after = Date.parse(raw)
  // The date-time format admits a leap second (…:60), which Date cannot represent.
  if (Number.isNaN(after)) {
    throw invalidParameter('updated_after', 'must be an RFC 3339 time, e.g. 2026-11-22T10:00:00Z')
  }
  return new Date(after).toISOString()
}

/**
 * Builds the query of one filter combination with a marker in place of each value, compiles it,
 * and records which value each parameter position takes. With a tag, the page is driven by the
 * tag's index, which lists its contacts in id order, so a page reads 51 index entries however
 * many contacts carry the tag (an `id in (subquery)` made SQLite collect all of them first).
 * When a probe found few matches of `q` or `updated_after`, their index drives the page instead.
 */
function compileListTemplate(db: Db, shape: ListShape): ListTemplate {
  const direction = shape.desc ? 'desc' : 'asc'
  if (shape.qIndexed) {
    return compileFewTermsTemplate(db, shape)
  }
  let query = shape.tag
    ? db
        .selectFrom('contact_tags')
        .innerJoin('contacts', (join) =>
          join
            .onRef('contacts.account_id', '=', 'contact_tags.account_id')
            .onRef('contacts.id', '=', 'contact_tags.contact_id'),
        )
        .select(['contacts.id', 'contacts.body'])
        .where('contact_tags.account_id', '=', marker('account'))
        .where('contact_tags.tag', '=', marker('tag'))
    : db
        .selectFrom('contacts')
        .select(['contacts.id', 'contacts.body'])
        .where('contacts.account_id', '=', marker('account'))
  const position = shape.tag ? 'contact_tags.contact_id' : 'contacts.id'
  if (shape.after) {
    query = query.where(position, shape.desc ? '<' : '>', marker('after'))
  }
  if (shape.email) {
    query = query.where('contacts.email_lower', '=', marker('email'))
  }
  if (shape.q) {
    // Lower-cased on both sides, so SQLite's case-insensitive LIKE and PostgreSQL's agree.
    query = query.where(sql<boolean>`contacts.search like ${marker('q')} escape '\\'`)
  }
  if (shape.updatedAfter && shape.updatedAfterIndexed) {
    // Few changed: found by the updated_at index and sorted. Ordering by an expression (same values,
    // same collation) keeps a planner from walking the primary key instead on a misestimate.
    query = query.where('contacts.updated_at', '>', marker('updatedAfter'))
    const compiled = query
      .orderBy(sql`${sql.ref(position)} || ''`, direction)
      .limit(FETCH_MARKER)
      .compile()
    return toTemplate(compiled, true)
  }
  if (shape.updatedAfter) {
    // Many changed: an expression no index serves, so the page walks the id order.
    query = query.where(sql<boolean>`(contacts.updated_at || '') > ${marker('updatedAfter')}`)
  }
  // Which plan is best depends on the values given: planned per call (no generic plan on PostgreSQL).
  return toTemplate(query.orderBy(position, direction).limit(FETCH_MARKER).compile(), shape.updatedAfter || shape.q)
}

/**
 * Few contacts have a value starting with `q`: their ids come from the contact_terms range (the
 * cursor applied there too), the other filters are checked on those few, and the page is sorted.
 * Expressions (`id || ''`, `updated_at || ''`) keep a planner from walking an index instead.
 */
function compileFewTermsTemplate(db: Db, shape: ListShape): ListTemplate {
  let matching = matchingTerms(db).select('contact_terms.contact_id')
  if (shape.after) {
    matching = matching.where('contact_terms.contact_id', shape.desc ? '<' : '>', marker('after'))
  }
  let query = db
    .selectFrom('contacts')
    .select(['contacts.id', 'contacts.body'])
    .where('contacts.account_id', '=', marker('account'))
    .where('contacts.id', 'in', matching)
  if (shape.tag) {
    query = query.where(({ exists, selectFrom }) =>
      exists(
        selectFrom('contact_tags')
          .select('contact_tags.contact_id')
          .where('contact_tags.account_id', '=', marker('account'))
          .where('contact_tags.tag', '=', marker('tag'))
          .whereRef('contact_tags.contact_id', '=', 'contacts.id'),
      ),
    )
  }
  if (shape.updatedAfter) {
    query = query.where(sql<boolean>`(contacts.updated_at || '') > ${marker('updatedAfter')}`)
  }
  const compiled = query
    .orderBy(sql`contacts.id || ''`, shape.desc ? 'desc' : 'asc')
    .limit(FETCH_MARKER)
    .compile()
  return toTemplate(compiled, true)
}

/**
 * Work the caller wants committed together with a write, or not at all: the route stores the
 * Idempotency-Key's answer this way, so a crash can never leave a write without its answer.
 */
export type WithWrite = (trx: Transaction<Database>, stored: StoredContact) => Promise<void>

/** Inserts a new contact from an input; 409 contact_exists (with the existing id) on a taken email. */
export async function createContact(
  db: Kysely<Database>,
  accountId: string,
  input: ContactInput,
  now: string,
  withWrite?: WithWrite,
): Promise<StoredContact> {
  const contact = applyContactInput(emptyContact(newId('contact'), now), input, now)
  try {
    return await db.transaction().execute(async (trx) => {
      const stored = await insertContact(trx, accountId, contact, now)
      await withWrite?.(trx, stored)
      return stored
    })
  } catch (error) {
    if (isUniqueViolation(error) && contact.email !== null) {
      const existingId = await findContactIdByEmail(db, accountId, contact.email)
      throw contactExists(existingId)
    }
    throw error
  }
}

/** Applies a merge-semantics update; undefined when the contact is not in this account. */
export async function updateContact(
  db: Kysely<Database>,
  accountId: string,
  id: string,
  input: ContactInput,
  now: string,
  withWrite?: WithWrite,
): Promise<StoredContact | undefined> {
  try {
    return await db.transaction().execute(async (trx) => {
      const updated = await updateLockedContact(trx, accountId, id, input, now)
      if (!updated) {
        return undefined
      }
      const stored = { contact: updated.contact, body: updated.body }
      await withWrite?.(trx, stored)
      return stored
    })
  } catch (error) {
    const email = input.email?.trim()
    if (isUniqueViolation(error) && email) {
      throw contactExists(await findContactIdByEmail(db, accountId, email))
    }
    throw error
  }
}

/** The insert of a contact already built, its tags and its event, inside the caller's transaction. */
async function insertContact(
  trx: Transaction<Database>,
  accountId: string,
  contact: Contact,
  now: string,
): Promise<StoredContact> {
  const row = toContactRow(accountId, contact)
  await trx.insertInto('contacts').values(row).execute()
  await insertTags(trx, accountId, contact.id, contact.tags)
  await insertTerms(trx, accountId, contact.id, searchTerms(contact))
  await recordEvent(trx, accountId, 'contact.created', contact, now)
  return { contact, body: row.body }
}

/**
 * The update inside the caller's transaction: locks the row, merges the input, writes the row,
 * its tags and its event when something changed. undefined when the contact is not in this account.
 */
async function updateLockedContact(
  trx: Transaction<Database>,
  accountId: string,
  id: string,
  input: ContactInput,
  now: string,
  options: { replaceCustomFields?: boolean } = {},
): Promise<(StoredContact & { changed: boolean }) | undefined> {
  const current = await lockContact(trx, accountId, id)
  if (!current) {
    return undefined
  }
  let effective = input
  if (options.replaceCustomFields && input.custom_fields) {
    // Replace, not merge: every key the input does not name is deleted (a null value deletes).
    const removed = Object.keys(current.contact.custom_fields).map((key) => [key, null] as const)
    effective = { ...input, custom_fields: { ...Object.fromEntries(removed), ...input.custom_fields } }
  }
  const contact = applyContactInput(current.contact, effective, now)
  if (contact === current.contact) {
    return { ...current, changed: false }
  }
  const row = toContactRow(accountId, contact)
  await trx
    .updateTable('contacts')
    .set({ email_lower: row.email_lower, search: row.search, updated_at: row.updated_at, body: row.body })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .execute()
  if (JSON.stringify(current.contact.tags) !== JSON.stringify(contact.tags)) {
    await trx.deleteFrom('contact_tags').where('account_id', '=', accountId).where('contact_id', '=', id).execute()
    await insertTags(trx, accountId, id, contact.tags)
  }
  const terms = searchTerms(contact)
  if (terms.join('\n') !== searchTerms(current.contact).join('\n')) {
    await trx.deleteFrom('contact_terms').where('account_id', '=', accountId).where('contact_id', '=', id).execute()
    await insertTerms(trx, accountId, id, terms)
  }
  await recordEvent(trx, accountId, 'contact.updated', contact, now)
  return { contact, body: row.body, changed: true }
}

/**
 * Reads the contact and locks it until the transaction ends, in one dialect-blind statement:
 * a no-op UPDATE takes the row lock on PostgreSQL and the write lock on SQLite, so concurrent
 * updates queue instead of losing each other's changes (and SQLite never has to upgrade a
 * read lock, which can fail with SQLITE_BUSY when another process writes).
 */
async function lockContact(
  trx: Transaction<Database>,
  accountId: string,
  id: string,
): Promise<StoredContact | undefined> {
  const row = await trx
    .updateTable('contacts')
    .set((eb) => ({ body: eb.ref('body') }))
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returning('body')
    .executeTakeFirst()
  return row ? { contact: JSON.parse(row.body) as Contact, body: row.body } : undefined
}

/** Creates by email, or updates the contact that has it. */
export async function upsertContact(
  db: Kysely<Database>,
  accountId: string,
  input: ContactInput & { email: string },
  now: string,
  withWrite?: (trx: Transaction<Database>, stored: StoredContact, created: boolean) => Promise<void>,
): Promise<StoredContact & { created: boolean }> {
  const withCreate: WithWrite | undefined = withWrite && ((trx, stored) => withWrite(trx, stored, true))
  const withUpdate: WithWrite | undefined = withWrite && ((trx, stored) => withWrite(trx, stored, false))
  for (let attempt = 0; attempt < 3; attempt++) {
    const existingId = await findContactIdByEmail(db, accountId, input.email)
    if (existingId !== undefined) {
      const updated = await updateContact(db, accountId, existingId, input, now, withUpdate)
      if (updated) {
        return { ...updated, created: false }
      }
      continue // deleted meanwhile: try again as a create
    }
    try {
      return { ...(await createContact(db, accountId, input, now, withCreate)), created: true }
    } catch (error) {
      // Created by a concurrent request between the lookup and the insert: update it instead.
      if (!(error instanceof AppError && error.code === 'contact_exists')) {
        throw error
      }
    }
  }
  throw new AppError('service_unavailable', 'The contact is being changed by other requests; retry shortly.', {
    headers: { 'retry-after': '1' },
  })
}

export interface ImportSummary {
  created: number
  updated: number
  /** Rows that matched a contact and changed nothing (no event). */
  unchanged: number
}

const IMPORT_LOOKUP_CHUNK = 500

/**
 * Upserts every row by email in ONE transaction: all rows are applied or none. Each change records
 * its event in that transaction. With replaceCustomFields, a row's custom_fields object replaces
 * the stored one instead of merging into it (a file row describes the whole contact). A row that
 * breaks a contact rule throws invalid_parameter with the extension `row` (0-based index).
 */
export async function importContacts(
  db: Kysely<Database>,
  accountId: string,
  rows: Array<ContactInput & { email: string }>,
  now: string,
  options: { replaceCustomFields?: boolean } = {},
): Promise<ImportSummary> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await db.transaction().execute((trx) => importInTransaction(trx, accountId, rows, now, options))
    } catch (error) {
      // A concurrent request took one of the emails between the lookup and the insert: the whole
      // transaction was rolled back, so run it again and update that contact instead.
      if (!isUniqueViolation(error)) {
        throw error
      }
      if (attempt >= 2) {
        throw new AppError('service_unavailable', 'The contacts are being changed by other requests; retry shortly.', {
          headers: { 'retry-after': '1' },
        })
      }
    }
  }
}

async function importInTransaction(
  trx: Transaction<Database>,
  accountId: string,
  rows: Array<ContactInput & { email: string }>,
  now: string,
  options: { replaceCustomFields?: boolean },
): Promise<ImportSummary> {
  const keyOf = (email: string) => email.trim().toLowerCase()
  const ids = new Map<string, string>()
  const emails = [...new Set(rows.map((row) => keyOf(row.email)))]
  for (let i = 0; i < emails.length; i += IMPORT_LOOKUP_CHUNK) {
    const found = await trx
      .selectFrom('contacts')
      .select(['id', 'email_lower'])
      .where('account_id', '=', accountId)
      .where('email_lower', 'in', emails.slice(i, i + IMPORT_LOOKUP_CHUNK))
      .execute()
    for (const { id, email_lower } of found) {
      if (email_lower !== null) {
        ids.set(email_lower, id)
      }
    }
  }
  const summary: ImportSummary = { created: 0, updated: 0, unchanged: 0 }
  for (const [index, input] of rows.entries()) {
    try {
      const existingId = ids.get(keyOf(input.email))
      const updated =
        existingId === undefined
          ? undefined
          : await updateLockedContact(trx, accountId, existingId, input, now, options)
      if (updated) {
        summary[updated.changed ? 'updated' : 'unchanged']++
      } else {
        const contact = applyContactInput(emptyContact(newId('contact'), now), input, now)
        await insertContact(trx, accountId, contact, now)
        if (contact.email !== null) {
          ids.set(contact.email.toLowerCase(), contact.id)
        }
        summary.created++
      }
    } catch (error) {
      if (error instanceof AppError && error.code === 'invalid_parameter') {
        throw new AppError('invalid_parameter', `row ${index}: ${error.message}`, {
          ...error.options,
          extensions: { ...error.options.extensions, row: String(index) },
        })
      }
      throw error
    }
  }
  return summary
}

export async function deleteContact(
  db: Kysely<Database>,
  accountId: string,
  id: string,
  now: string,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('contacts')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning('body')
      .executeTakeFirst()
    if (!deleted) {
      return false
    }
    await recordEvent(trx, accountId, 'contact.deleted', JSON.parse(deleted.body) as Contact, now)
    return true
  })
}

async function insertTags(
  trx: Transaction<Database>,
  accountId: string,
  contactId: string,
  tags: string[],
): Promise<void> {
  if (tags.length > 0) {
    await trx
      .insertInto('contact_tags')
      .values(tags.map((tag) => ({ account_id: accountId, tag, contact_id: contactId })))
      .execute()
  }
}

async function insertTerms(
  trx: Transaction<Database>,
  accountId: string,
  contactId: string,
  terms: string[],
): Promise<void> {
  if (terms.length > 0) {
    await trx
      .insertInto('contact_terms')
      .values(terms.map((term) => ({ account_id: accountId, term, contact_id: contactId })))
      .execute()
  }
}

function contactExists(existingId: string | undefined): AppError {
  return new AppError('contact_exists', 'A contact with this email already exists in this account.', {
    errors: [{ field: 'email', message: 'is already used by another contact' }],
    ...(existingId ? { extensions: { existing_id: existingId } } : {}),
  })
}
