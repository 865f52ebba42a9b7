// Tenant-scoped reads that a contact write makes before it writes: the contact locked for the
// transaction, and the one lookup of contacts by email. The writes are contact-writes.ts's.
import { type Dialect, dialectOf } from '../db/dialect.js'
import { bind, type Statement, sqlFor } from '../db/statement.js'
import type { Db, Trx } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'
import { parseStoredContact } from './contacts.js'
import type { Contact } from './contacts.schemas.js'

export interface StoredContact {
  contact: Contact
  /** The contact serialized, exactly as stored and as sent. */
  body: string
}

const postgres = sqlFor('postgres')
const sqlite = sqlFor('sqlite')

/**
 * A no-op UPDATE reads the contact and locks it until the transaction ends: the row lock on
 * PostgreSQL, the write lock on SQLite (which then never has to upgrade a read lock, which can fail
 * with SQLITE_BUSY when another connection writes). Concurrent updates queue instead of losing
 * each other's changes.
 */
const LOCK: Record<Dialect, Record<'id' | 'emailLower', Statement<'account' | 'key'>>> = {
  postgres: {
    id: postgres`update contacts set body = body where account_id = ${'account'} and id = ${'key'} returning body`,
    emailLower: postgres`
      update contacts set body = body where account_id = ${'account'} and email_lower = ${'key'} returning body`,
  },
  sqlite: {
    id: sqlite`update contacts set body = body where account_id = ${'account'} and id = ${'key'} returning body`,
    emailLower: sqlite`
      update contacts set body = body where account_id = ${'account'} and email_lower = ${'key'} returning body`,
  },
}

/** The contact, locked until the transaction ends; undefined when the account has none such. */
export async function lockContact(
  trx: Trx,
  accountId: string,
  by: { id: string } | { email: string },
): Promise<StoredContact | undefined> {
  const lock = LOCK[dialectOf(trx)]
  const query =
    'id' in by
      ? bind(lock.id, { account: accountId, key: by.id })
      : bind(lock.emailLower, { account: accountId, key: emailKey(by.email) })
  const { rows } = await trx.executeQuery<{ body: string }>(query)
  const body = rows[0]?.body
  return body === undefined ? undefined : { contact: parseStoredContact(body), body }
}

/**
 * One probe of the unique (account_id, email_lower) index per email, as a scalar subquery per
 * element: an `email_lower IN (…)` list can be planned as a walk of the whole account when the
 * table grew since its last ANALYZE (docs/batch.md).
 */
const LOOKUP: Record<Dialect, Statement<'account' | 'emails'>> = {
  postgres: postgres`
    select e.email_lower, (select c.id from contacts c where c.account_id = ${'account'} and c.email_lower = e.email_lower) as id
    from unnest(${'emails'}::text[]) as e(email_lower)`,
  sqlite: sqlite`
    select value as email_lower, (select c.id from contacts c where c.account_id = ${'account'} and c.email_lower = value) as id
    from json_each(${'emails'})`,
}

/** Emails looked up per statement. */
const LOOKUP_CHUNK = 500

/** The ids of the account's contacts that have these emails, by email key (lib/email.ts). */
export async function findContactIdsByEmail(
  db: Db,
  accountId: string,
  emails: readonly string[],
): Promise<Map<string, string>> {
  const keys = [...new Set(emails.map((email) => emailKey(email)))]
  const dialect = dialectOf(db)
  const found = new Map<string, string>()
  for (let i = 0; i < keys.length; i += LOOKUP_CHUNK) {
    const chunk = keys.slice(i, i + LOOKUP_CHUNK)
    const { rows } = await db.executeQuery<{ email_lower: string; id: string | null }>(
      bind(LOOKUP[dialect], { account: accountId, emails: dialect === 'postgres' ? chunk : JSON.stringify(chunk) }),
    )
    for (const row of rows) {
      if (row.id !== null) {
        found.set(row.email_lower, row.id)
      }
    }
  }
  return found
}

/** 409 contact_exists, as a create or an update whose email another contact has is answered. */
export const contactExists = (existingId: string | undefined): AppError =>
  new AppError('contact_exists', 'A contact with this email already exists in this account.', {
    errors: [{ field: 'email', message: 'is already used by another contact' }],
    ...(existingId ? { extensions: { existing_id: existingId } } : {}),
  })

/** How many of these emails no contact of the account has: the contacts an import of them would create. */
export async function countNewEmails(db: Db, accountId: string, emails: readonly string[]): Promise<number> {
  const found = await findContactIdsByEmail(db, accountId, emails)
  return new Set(emails.map((email) => emailKey(email))).size - found.size
}
