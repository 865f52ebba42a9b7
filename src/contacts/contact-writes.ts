// The one write path of contact rows: `writeContacts` writes an ordered list of changes in the
// caller's transaction: the contacts, their tag and term rows, the count and one event per change.
// Each statement takes its rows as arrays (unnest on PostgreSQL, json_each on SQLite), so one text
// serves any number of contacts and is prepared once per connection; PostgreSQL has its own texts
// for a single contact (docs/design.md, "SQL statements"); a create there is one statement
// (contact-writes.postgres.ts, contact-writes.sqlite.ts). Only the contact service calls it
// (contact-writers.test.ts checks).
import { type Tenant, tenantById } from '../accounts/tenant.js'
import { dialectOf } from '../db/dialect.js'
import { bind, sqlFor } from '../db/statement.js'
import type { Trx } from '../db/transaction.js'
import { type ContactEventType, newEvent } from '../events/events.js'
import { POSTGRES_WRITER } from './contact-writes.postgres.js'
import type { DialectWriter, WriteScope } from './contact-writes.rows.js'
import { SQLITE_WRITER } from './contact-writes.sqlite.js'
import { toContactRows } from './contacts.js'
import type { Contact } from './contacts.schemas.js'

export type ContactChange =
  | { type: 'create'; contact: Contact }
  | { type: 'update'; before: Contact; after: Contact }
  | { type: 'delete'; id: string }

export type { WriteScope } from './contact-writes.rows.js'

export interface WrittenContacts {
  /** The account's contact count after the writes, when a statement returned it (PostgreSQL creates). */
  count: number | undefined
  /** Per change, in order: the body stored, or for a delete the body deleted (undefined: there was none). */
  bodies: Array<string | undefined>
}

/**
 * Writes the changes in order. Consecutive changes of one type run as one group of statements; a
 * contact named twice starts a new group, since a statement sees the rows as they were before it.
 * Event ids are made in the changes' order first, so the feed lists the events in that order.
 */
export async function writeContacts(
  trx: Trx,
  scope: WriteScope,
  changes: readonly ContactChange[],
): Promise<WrittenContacts> {
  const { livemode } = tenantById(scope.accountId)
  const events = changes.map((change) => newEvent(EVENT_OF[change.type], scope.now, livemode))
  const written: WrittenContacts = { count: undefined, bodies: new Array(changes.length) }
  const writer = WRITERS[dialectOf(trx)]
  for (const [start, end] of groups(changes)) {
    const first = changes[start] as ContactChange
    const slice = { from: start, changes: changes.slice(start, end), events: events.slice(start, end) }
    if (first.type === 'create') {
      const rows = (slice.changes as CreateChange[]).map(({ contact }) => toContactRows(scope.accountId, contact))
      rows.forEach((row, i) => {
        written.bodies[start + i] = row.contact.body
      })
      written.count = await writer.create(trx, scope, rows, slice.events)
    } else if (first.type === 'update') {
      const pairs = (slice.changes as UpdateChange[]).map(({ before, after }) => ({
        before,
        after,
        rows: toContactRows(scope.accountId, after),
      }))
      pairs.forEach((pair, i) => {
        written.bodies[start + i] = pair.rows.contact.body
      })
      await writer.update(trx, scope, pairs, slice.events)
    } else {
      const ids = (slice.changes as DeleteChange[]).map((change) => change.id)
      const deleted = await writer.remove(trx, scope, ids, slice.events)
      ids.forEach((id, i) => {
        written.bodies[start + i] = deleted.get(id)
      })
      written.count = undefined
    }
  }
  return written
}

type CreateChange = Extract<ContactChange, { type: 'create' }>
type UpdateChange = Extract<ContactChange, { type: 'update' }>
type DeleteChange = Extract<ContactChange, { type: 'delete' }>

const EVENT_OF: Record<ContactChange['type'], ContactEventType> = {
  create: 'contact.created',
  update: 'contact.updated',
  delete: 'contact.deleted',
}

const idOf = (change: ContactChange): string =>
  change.type === 'create' ? change.contact.id : change.type === 'update' ? change.after.id : change.id

/** [start, end) ranges of consecutive changes of one type with no contact named twice. */
function groups(changes: readonly ContactChange[]): Array<[number, number]> {
  const ranges: Array<[number, number]> = []
  let start = 0
  let seen = new Set<string>()
  changes.forEach((change, i) => {
    const id = idOf(change)
    if (i > start && (change.type !== changes[start]?.type || seen.has(id))) {
      ranges.push([start, i])
      start = i
      seen = new Set()
    }
    seen.add(id)
  })
  if (changes.length > start) {
    ranges.push([start, changes.length])
  }
  return ranges
}

/**
 * Deletes up to `limit` of a test tenant's contacts, with their tag and term rows and without
 * events (the deletion of all test data, src/accounts/test-data.ts, deletes the events too); once
 * none is left, the tenant's count. Refuses a live tenant.
 */
export async function purgeTestContacts(trx: Trx, tenant: Tenant, limit: number): Promise<number> {
  if (tenant.livemode) {
    throw new Error('purgeTestContacts: a live tenant is never purged')
  }
  const statements = PURGE[dialectOf(trx)]
  const result = await trx.executeQuery(bind(statements.contacts, { account: tenant.id, limit }))
  const deleted = Number(result.numAffectedRows ?? 0)
  if (deleted < limit) {
    await trx.executeQuery(bind(statements.count, { account: tenant.id }))
  }
  return deleted
}

/** Tag and term rows go with their contact (on delete cascade). */
const purgeStatements = (dialect: 'postgres' | 'sqlite') => {
  const sql = sqlFor(dialect)
  return {
    contacts: sql`
      delete from contacts where (account_id, id) in (
        select account_id, id from contacts where account_id = ${'account'} limit ${'limit'})`,
    count: sql`delete from contact_counts where account_id = ${'account'}`,
  }
}
const PURGE = { postgres: purgeStatements('postgres'), sqlite: purgeStatements('sqlite') }

const WRITERS: Record<'postgres' | 'sqlite', DialectWriter> = { postgres: POSTGRES_WRITER, sqlite: SQLITE_WRITER }
