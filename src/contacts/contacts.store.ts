// Tenant-scoped storage of one contact: find, create, update, upsert, delete. Every function takes
// the account id and every query filters by it. The writes run in the caller's transaction (the
// route opens it, so an Idempotency-Key's answer commits with the write) and record their event in it.
import { CompiledQuery, type Kysely } from 'kysely'
import { dialectOf, isUniqueViolation } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import {
  conflictPause,
  type Db,
  inTransaction,
  isTransactionConflict,
  type OnCommit,
  type Trx,
} from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import { lockContactRow, writeChangedContact, writeDeletedContact, writeNewContact } from './contact-writes.js'
import { applyContactInput, emptyContact, parseStoredContact, toContactRows } from './contacts.js'
import type { Contact, ContactInput } from './contacts.schemas.js'

export interface StoredContact {
  contact: Contact
  /** The contact serialized, exactly as stored and as sent. */
  body: string
}

async function findContactIdByEmail(db: Db, accountId: string, email: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contacts')
    .select('id')
    .where('account_id', '=', accountId)
    .where('email_lower', '=', emailKey(email))
    .executeTakeFirst()
  return row?.id
}

/** Inserts a new contact from an input. A taken email is a unique violation: see orContactExists. */
export async function createContact(
  trx: Trx,
  accountId: string,
  input: ContactInput,
  now: string,
): Promise<StoredContact> {
  const contact = applyContactInput(emptyContact(newId('contact'), now), input, now)
  return insertContact(trx, accountId, contact, now)
}

/**
 * A test of the contact as stored (its body), made inside the write's transaction with the row
 * locked, before its event is written: it throws to refuse the write (If-Match,
 * http/conditional.ts), which rolls the transaction back. Checked under the lock, so no other
 * write can land between the check and the write.
 */
export type ContactPrecondition = (currentBody: string) => void

/** Applies a merge-semantics update; undefined when the contact is not in this account. */
export async function updateContact(
  trx: Trx,
  accountId: string,
  id: string,
  input: ContactInput,
  now: string,
  precondition?: ContactPrecondition,
): Promise<StoredContact | undefined> {
  const current = await lockContact(trx, accountId, { id })
  if (current && precondition) {
    precondition(current.body)
  }
  return current && (await updateLockedContact(trx, accountId, current, input, now))
}

/**
 * Creates by email, or updates the contact that has it. When a concurrent request creates the email
 * between the lookup and the insert, the insert is a unique violation: run it again in a new
 * transaction (retryOnConflict), where the lookup finds that contact.
 */
export async function upsertContact(
  trx: Trx,
  accountId: string,
  input: ContactInput & { email: string },
  now: string,
): Promise<StoredContact & { created: boolean }> {
  const current = await lockContact(trx, accountId, { email: input.email })
  if (current) {
    const { contact, body } = await updateLockedContact(trx, accountId, current, input, now)
    return { contact, body, created: false }
  }
  return { ...(await createContact(trx, accountId, input, now)), created: true }
}

/**
 * Deletes the contact and records its event; false when it is not in this account. A precondition
 * sees the contact as deleted (the delete locked the row) and can still undo it by throwing, which
 * rolls the transaction back, the delete and its event with it.
 */
export async function deleteContact(
  trx: Trx,
  accountId: string,
  id: string,
  now: string,
  precondition?: ContactPrecondition,
): Promise<boolean> {
  const deletedBody = await writeDeletedContact(trx, accountId, id, now)
  if (deletedBody === undefined) {
    return false
  }
  precondition?.(deletedBody)
  return true
}

/** The insert of a contact already built, its tags, terms and event. */
export async function insertContact(
  trx: Trx,
  accountId: string,
  contact: Contact,
  now: string,
): Promise<StoredContact> {
  const rows = toContactRows(accountId, contact)
  await writeNewContact(trx, accountId, rows, now)
  return { contact, body: rows.contact.body }
}

/**
 * Merges the input into a contact locked by lockContact, and writes the row, its tags, terms and
 * event when something changed. With replaceCustomFields, the input's custom_fields replace the
 * stored ones instead of merging into them (an import row describes the whole contact).
 */
export async function updateLockedContact(
  trx: Trx,
  accountId: string,
  current: StoredContact,
  input: ContactInput,
  now: string,
  options: { replaceCustomFields?: boolean } = {},
): Promise<StoredContact & { changed: boolean }> {
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
  const rows = toContactRows(accountId, contact)
  await writeChangedContact(trx, accountId, toContactRows(accountId, current.contact), rows, now)
  return { contact, body: rows.contact.body, changed: true }
}

/**
 * Reads the contact and locks it until the transaction ends, in one dialect-blind statement:
 * a no-op UPDATE takes the row lock on PostgreSQL and the write lock on SQLite, so concurrent
 * updates queue instead of losing each other's changes (and SQLite never has to upgrade a
 * read lock, which can fail with SQLITE_BUSY when another process writes).
 */
export async function lockContact(
  trx: Trx,
  accountId: string,
  by: { id: string } | { email: string },
): Promise<StoredContact | undefined> {
  const body = await lockContactRow(trx, accountId, 'id' in by ? by : { emailLower: emailKey(by.email) })
  return body === undefined ? undefined : { contact: parseStoredContact(body), body }
}

/**
 * Runs a write that sets `email` (the route's transaction, whole). A taken email is a unique
 * violation, which on PostgreSQL aborts the transaction: the contact that has it is looked up
 * after the rollback, and the error becomes 409 contact_exists with its id.
 */
export async function orContactExists<T>(
  db: Kysely<Database>,
  accountId: string,
  email: string | null | undefined,
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write()
  } catch (error) {
    if (isUniqueViolation(error) && email?.trim()) {
      const existingId = await findContactIdByEmail(db, accountId, email)
      throw new AppError('contact_exists', 'A contact with this email already exists in this account.', {
        errors: [{ field: 'email', message: 'is already used by another contact' }],
        ...(existingId ? { extensions: { existing_id: existingId } } : {}),
      })
    }
    throw error
  }
}

const CONFLICT_ATTEMPTS = 3
/** A deadlock or serialization failure (db/transaction.ts): attempts in all before the 503. */
const DEADLOCK_ATTEMPTS = 5

/**
 * Runs `work` in a transaction, and again in a new one when a unique violation rolled it back: a
 * concurrent request created one of its emails between the lookup and the insert, and the next
 * attempt's lookup finds that contact. After three attempts: 503 with Retry-After. A deadlock or a
 * serialization failure on PostgreSQL (40P01, 40001) is run again too, after a short random pause,
 * up to five attempts in all, then the same 503: a client never sees a deadlock as a 500. `work`
 * must be safe to run again: only its database writes (rolled back) and after-commit effects
 * (dropped with them, inTransaction) may outlive an attempt.
 */
export async function retryOnConflict<T>(
  db: Kysely<Database>,
  work: (trx: Trx, onCommit: OnCommit) => Promise<T>,
  busy = 'The contact is being changed by other requests; retry shortly.',
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransaction(db, work)
    } catch (error) {
      const conflict = isTransactionConflict(error)
      if (!conflict && !isUniqueViolation(error)) {
        throw error
      }
      if (attempt >= (conflict ? DEADLOCK_ATTEMPTS : CONFLICT_ATTEMPTS)) {
        throw new AppError('service_unavailable', busy, { headers: { 'retry-after': '1' } })
      }
      if (conflict) {
        await conflictPause(attempt)
      }
    }
  }
}

/**
 * The ids of this account's contacts that have these emails, by email key (lib/email.ts emailKey).
 * One lookup per email on the unique (account_id, email_lower) index, as a scalar subquery per
 * VALUES row: `email_lower IN (…100 values)` let PostgreSQL, on a table that grew since its last
 * ANALYZE (a bulk load), walk the whole account by another index (58 ms per batch at 10,000
 * contacts, growing with the account). Both dialects name a VALUES list's column `column1`. The
 * SQL text is kept per email count (a batch's lookup built by Kysely cost ~1 µs a value).
 */
const lookupTexts = new Map<string, string>()

export async function findContactIdsByEmail(
  db: Db,
  accountId: string,
  emails: readonly string[],
): Promise<Map<string, string>> {
  const keys = [...new Set(emails.map((email) => emailKey(email)))]
  if (keys.length === 0) {
    return new Map()
  }
  const postgres = dialectOf(db) === 'postgres'
  const key = `${postgres ? 'p' : 's'}|${keys.length}`
  let text = lookupTexts.get(key)
  if (text === undefined) {
    const values = keys.map((_, i) => (postgres ? `($${i + 2})` : '(?)')).join(', ')
    text = `select v.column1 as email_lower, (select c.id from contacts c where c.account_id = ${postgres ? '$1' : '?'} and c.email_lower = v.column1) as id from (values ${values}) as v`
    lookupTexts.set(key, text)
  }
  const { rows } = await db.executeQuery<{ email_lower: string; id: string | null }>(
    CompiledQuery.raw(text, [accountId, ...keys]),
  )
  return new Map(rows.flatMap((row) => (row.id === null ? [] : [[row.email_lower, row.id] as const])))
}

/** 409 contact_exists, as a create or an update whose email another contact has is answered. */
export const contactExists = (existingId: string | undefined): AppError =>
  new AppError('contact_exists', 'A contact with this email already exists in this account.', {
    errors: [{ field: 'email', message: 'is already used by another contact' }],
    ...(existingId ? { extensions: { existing_id: existingId } } : {}),
  })
