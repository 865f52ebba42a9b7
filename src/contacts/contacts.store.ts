// Tenant-scoped contact storage. Every function takes the account id; every query filters by it.
// Each write records its event in the same transaction.
import { type Kysely, sql, type Transaction } from 'kysely'
import { isUniqueViolation } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import { recordEvent } from '../events/events.js'
import { AppError } from '../http/errors.js'
import type { PageRow } from '../http/pagination.js'
import { newId } from '../lib/ids.js'
import { applyContactInput, emptyContact, toContactRow } from './contacts.js'
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
}

/** Keyset page by id (creation order): the cost does not grow with depth. */
export async function listContactRows(db: Db, accountId: string, options: ListContactsOptions): Promise<PageRow[]> {
  const desc = options.order === 'desc'
  let query = db.selectFrom('contacts').select(['id', 'body']).where('account_id', '=', accountId)
  if (options.afterId !== undefined) {
    query = query.where('id', desc ? '<' : '>', options.afterId)
  }
  if (options.email !== undefined) {
    query = query.where('email_lower', '=', options.email.trim().toLowerCase())
  }
  if (options.tag !== undefined) {
    const tag = options.tag
    query = query.where('id', 'in', (sub) =>
      sub.selectFrom('contact_tags').select('contact_id').where('account_id', '=', accountId).where('tag', '=', tag),
    )
  }
  if (options.q !== undefined) {
    const escaped = options.q
      .toLowerCase()
      .replace(/\s+/g, ' ')
      .replace(/[\\%_]/g, (c) => `\\${c}`)
    // Lower-cased on both sides, so SQLite's case-insensitive LIKE and PostgreSQL's agree.
    query = query.where(sql<boolean>`search like ${`%\n${escaped}%`} escape '\\'`)
  }
  if (options.updated_after !== undefined) {
    query = query.where('updated_at', '>', new Date(options.updated_after).toISOString())
  }
  return query
    .orderBy('id', desc ? 'desc' : 'asc')
    .limit(options.fetch)
    .execute()
}

/** Inserts a new contact from an input; 409 contact_exists (with the existing id) on a taken email. */
export async function createContact(
  db: Kysely<Database>,
  accountId: string,
  input: ContactInput,
  now: string,
): Promise<StoredContact> {
  const contact = applyContactInput(emptyContact(newId('contact'), now), input, now)
  const row = toContactRow(accountId, contact)
  try {
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('contacts').values(row).execute()
      await insertTags(trx, accountId, contact.id, contact.tags)
      await recordEvent(trx, accountId, 'contact.created', contact, now)
    })
  } catch (error) {
    if (isUniqueViolation(error) && contact.email !== null) {
      const existingId = await findContactIdByEmail(db, accountId, contact.email)
      throw contactExists(existingId)
    }
    throw error
  }
  return { contact, body: row.body }
}

/** Applies a merge-semantics update; undefined when the contact is not in this account. */
export async function updateContact(
  db: Kysely<Database>,
  accountId: string,
  id: string,
  input: ContactInput,
  now: string,
): Promise<StoredContact | undefined> {
  try {
    return await db.transaction().execute(async (trx) => {
      const current = await lockContact(trx, accountId, id)
      if (!current) {
        return undefined
      }
      const contact = applyContactInput(current.contact, input, now)
      if (contact === current.contact) {
        return current
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
      await recordEvent(trx, accountId, 'contact.updated', contact, now)
      return { contact, body: row.body }
    })
  } catch (error) {
    const email = input.email?.trim()
    if (isUniqueViolation(error) && email) {
      throw contactExists(await findContactIdByEmail(db, accountId, email))
    }
    throw error
  }
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
): Promise<StoredContact & { created: boolean }> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const existingId = await findContactIdByEmail(db, accountId, input.email)
    if (existingId !== undefined) {
      const updated = await updateContact(db, accountId, existingId, input, now)
      if (updated) {
        return { ...updated, created: false }
      }
      continue // deleted meanwhile: try again as a create
    }
    try {
      return { ...(await createContact(db, accountId, input, now)), created: true }
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

function contactExists(existingId: string | undefined): AppError {
  return new AppError('contact_exists', 'A contact with this email already exists in this account.', {
    errors: [{ field: 'email', message: 'is already used by another contact' }],
    ...(existingId ? { extensions: { existing_id: existingId } } : {}),
  })
}
