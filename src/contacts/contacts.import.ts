// The bulk import: many contacts upserted by email in the caller's transaction (the CSV import job
// calls it once per chunk of rows, src/imports/import-job.ts).
import type { Db, Trx } from '../db/transaction.js'
import { recordEvent } from '../events/events.js'
import { AppError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import { addToContactCount } from './contact-count.js'
import { applyContactInput, emptyContact, toContactRows } from './contacts.js'
import type { Contact, ContactInput } from './contacts.schemas.js'
import { lockContact, updateLockedContact } from './contacts.store.js'

export interface ImportSummary {
  created: number
  updated: number
  /** Rows that matched a contact and changed nothing (no event). */
  unchanged: number
}

/** Emails looked up per query: well under either database's limit on bound parameters. */
const IMPORT_LOOKUP_CHUNK = 500

/**
 * Upserts every row by email in the caller's transaction; each change records its event in it.
 * With replaceCustomFields, a row's custom_fields object replaces the stored one instead of merging
 * into it (a file row describes the whole contact). A row that breaks a contact rule throws
 * invalid_parameter with the extension `row` (0-based index). A concurrent request that takes one
 * of the emails makes an insert a unique violation: run the import with retryOnConflict.
 */
export async function importContacts(
  trx: Trx,
  accountId: string,
  rows: Array<ContactInput & { email: string }>,
  now: string,
  options: { replaceCustomFields?: boolean } = {},
): Promise<ImportSummary> {
  const ids = await findContactIdsByEmail(trx, accountId, rows)
  const summary: ImportSummary = { created: 0, updated: 0, unchanged: 0 }
  // New contacts wait here and are written together (insertNewContacts): a statement per table for
  // all of them instead of one per contact, which on PostgreSQL is a round trip each. Written before
  // an update or a second row of the same email, so every event keeps the file's order.
  let pending: Contact[] = []
  const flush = async () => {
    if (pending.length > 0) {
      await insertNewContacts(trx, accountId, pending, now)
      pending = []
    }
  }
  for (const [index, input] of rows.entries()) {
    try {
      const key = emailKey(input.email)
      const existingId = ids.get(key)
      if (existingId !== undefined) {
        await flush()
      }
      const current = existingId === undefined ? undefined : await lockContact(trx, accountId, { id: existingId })
      if (current) {
        const updated = await updateLockedContact(trx, accountId, current, input, now, options)
        summary[updated.changed ? 'updated' : 'unchanged']++
      } else {
        const contact = applyContactInput(emptyContact(newId('contact'), now), input, now)
        pending.push(contact)
        if (contact.email !== null) {
          ids.set(emailKey(contact.email), contact.id)
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
  await flush()
  return summary
}

/**
 * What insertContact does for one contact, for several: their rows, tags and terms in one
 * statement each, the account's count once, then each one's event in order.
 */
async function insertNewContacts(trx: Trx, accountId: string, contacts: Contact[], now: string): Promise<void> {
  const rows = contacts.map((contact) => toContactRows(accountId, contact))
  await trx
    .insertInto('contacts')
    .values(rows.map((row) => row.contact))
    .execute()
  await addToContactCount(trx, accountId, contacts.length)
  const tags = rows.flatMap((row) => row.tags)
  if (tags.length > 0) {
    await trx.insertInto('contact_tags').values(tags).execute()
  }
  const terms = rows.flatMap((row) => row.terms)
  if (terms.length > 0) {
    await trx.insertInto('contact_terms').values(terms).execute()
  }
  for (const row of rows) {
    await recordEvent(trx, accountId, 'contact.created', row.contact.body, now)
  }
}

/** How many of the rows' emails no contact of the account has yet: the contacts an import would create. */
export async function countNewEmails(db: Db, accountId: string, rows: Array<{ email: string }>): Promise<number> {
  const found = await findContactIdsByEmail(db, accountId, rows)
  return new Set(rows.map((row) => emailKey(row.email))).size - found.size
}

/** The ids of the account's contacts that have the rows' emails, by emailKey. */
async function findContactIdsByEmail(
  trx: Db,
  accountId: string,
  rows: Array<{ email: string }>,
): Promise<Map<string, string>> {
  const ids = new Map<string, string>()
  const emails = [...new Set(rows.map((row) => emailKey(row.email)))]
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
  return ids
}
