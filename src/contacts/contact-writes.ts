// How the rows of one contact are written: the contact, its tag and term rows, the account's count
// and the change's event, in the caller's transaction. contacts.store.ts decides what to write.
//
// The statements are written once per dialect (db/statement.ts) and run as compiled queries: no
// Kysely query is built per call (a create on SQLite in-process: 528 µs of CPU by the old path, 326
// by compiled statements; over HTTP −15 % CPU per POST; docs/performance.md, "Writes on PostgreSQL").
//
// PostgreSQL: each write is one statement, a data-modifying CTE. Every statement is a round trip,
// and the transaction holds its pooled connection and its row locks (the contact, the count's
// shard: one per transaction, contact-count.ts) across all of them: a create was BEGIN, six statements and COMMIT, eight round trips; now
// BEGIN, one, COMMIT (the quota check reads the count the statement returns); an update four
// instead of five to nine, a delete three instead of five. The sub-statements see one snapshot and
// fire foreign-key checks at the statement's end, so the tag and term rows of a new contact can
// name it; rows are never both deleted and inserted in one statement (the tags and terms a change
// removes and adds are disjoint).
// SQLite: a statement is a function call, not a round trip; one per table, tag and term rows from a
// JSON array (json_each), so each text is the same whatever the number of rows.
import type { Dialect } from '../db/dialect.js'
import { dialectOf } from '../db/dialect.js'
import { bind, rawSql, type Statement, sqlFor } from '../db/statement.js'
import type { Trx } from '../db/transaction.js'
import { eventEnvelope } from '../events/events.js'
import { POSTGRES_EVENT_POSITION, SQLITE_NEXT_EVENT_POSITION } from '../events/feed-position.js'
import { countChanged, countShard } from './contact-count.js'
import type { ContactRows } from './contacts.js'

const postgres = sqlFor('postgres')
const position = rawSql(POSTGRES_EVENT_POSITION)
const sqlite = sqlFor('sqlite')

/** The count after this statement: before it (the transaction's own earlier changes included) + 1. */
const POSTGRES_CREATE = postgres`
  with contact as (
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    values (${'account'}, ${'id'}, ${'emailLower'}, ${'search'}, ${'createdAt'}, ${'updatedAt'}, ${'body'})
  ), tags as (
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, tag, ${'id'} from unnest(${'tags'}::text[]) as tag
  ), terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, term, ${'id'} from unnest(${'terms'}::text[]) as term
  ), counted as (
    insert into contact_counts (account_id, shard, n) values (${'account'}, ${'shard'}, 1)
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    values (${'account'}, ${'eventId'}, ${position}, 'contact.created', ${'now'}, ${'eventBody'})
  )
  select (coalesce(sum(n), 0) + 1)::bigint as count from contact_counts where account_id = ${'account'}`

const POSTGRES_UPDATE = postgres`
  with contact as (
    update contacts set email_lower = ${'emailLower'}, search = ${'search'}, updated_at = ${'updatedAt'}, body = ${'body'}
    where account_id = ${'account'} and id = ${'id'}
  ), removed_tags as (
    delete from contact_tags
    where account_id = ${'account'} and contact_id = ${'id'} and tag = any(${'removedTags'}::text[])
  ), added_tags as (
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, tag, ${'id'} from unnest(${'addedTags'}::text[]) as tag
  ), removed_terms as (
    delete from contact_terms
    where account_id = ${'account'} and contact_id = ${'id'} and term = any(${'removedTerms'}::text[])
  ), added_terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, term, ${'id'} from unnest(${'addedTerms'}::text[]) as term
  )
  insert into events (account_id, id, tx_id, type, created_at, body)
  values (${'account'}, ${'eventId'}, ${position}, 'contact.updated', ${'now'}, ${'eventBody'})`

/** The contact's tag and term rows go by cascade. One row when it existed. */
const POSTGRES_DELETE = postgres`
  with contact as (
    delete from contacts where account_id = ${'account'} and id = ${'id'} returning body
  ), counted as (
    insert into contact_counts (account_id, shard, n) select ${'account'}, ${'shard'}::integer, -1 from contact
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, ${'eventId'}, ${position}, 'contact.deleted', ${'now'},
      ${'eventPrefix'} || body || ${'eventSuffix'}
    from contact
  )
  select body from contact`

const SQLITE = {
  insertContact: sqlite`
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    values (${'account'}, ${'id'}, ${'emailLower'}, ${'search'}, ${'createdAt'}, ${'updatedAt'}, ${'body'})`,
  updateContact: sqlite`
    update contacts set email_lower = ${'emailLower'}, search = ${'search'}, updated_at = ${'updatedAt'}, body = ${'body'}
    where account_id = ${'account'} and id = ${'id'}`,
  deleteContact: sqlite`delete from contacts where account_id = ${'account'} and id = ${'id'} returning body`,
  addToCount: sqlite`
    insert into contact_counts (account_id, shard, n) values (${'account'}, ${'shard'}, ${'delta'})
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n`,
  insertTags: sqlite`
    insert into contact_tags (account_id, tag, contact_id) select ${'account'}, value, ${'id'} from json_each(${'values'})`,
  deleteTags: sqlite`
    delete from contact_tags
    where account_id = ${'account'} and contact_id = ${'id'} and tag in (select value from json_each(${'values'}))`,
  insertTerms: sqlite`
    insert into contact_terms (account_id, term, contact_id) select ${'account'}, value, ${'id'} from json_each(${'values'})`,
  deleteTerms: sqlite`
    delete from contact_terms
    where account_id = ${'account'} and contact_id = ${'id'} and term in (select value from json_each(${'values'}))`,
  nextPosition: sqlite`${rawSql(SQLITE_NEXT_EVENT_POSITION)}`,
  insertEvent: sqlite`
    insert into events (account_id, id, tx_id, type, created_at, body)
    values (${'account'}, ${'id'}, ${'position'}, ${'type'}, ${'now'}, ${'body'})`,
}

/**
 * Reads and locks the contact until the transaction ends: a no-op UPDATE takes the row lock on
 * PostgreSQL and the write lock on SQLite (contacts.store.ts, lockContact). By id or by email key.
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

/** The stored body of the contact, now locked for this transaction; undefined when there is none. */
export async function lockContactRow(
  trx: Trx,
  accountId: string,
  by: { id: string } | { emailLower: string },
): Promise<string | undefined> {
  const lock = LOCK[dialectOf(trx)]
  const query =
    'id' in by
      ? bind(lock.id, { account: accountId, key: by.id })
      : bind(lock.emailLower, { account: accountId, key: by.emailLower })
  const { rows } = await trx.executeQuery<{ body: string }>(query)
  return rows[0]?.body
}

/** Writes a new contact's rows, adds it to the count and records contact.created. */
export async function writeNewContact(trx: Trx, accountId: string, rows: ContactRows, now: string): Promise<void> {
  const { contact } = rows
  const event = eventEnvelope('contact.created', now)
  const eventBody = event.prefix + contact.body + event.suffix
  const values = {
    account: accountId,
    id: contact.id,
    emailLower: contact.email_lower,
    search: contact.search,
    createdAt: contact.created_at,
    updatedAt: contact.updated_at,
    body: contact.body,
    shard: countShard(trx),
  }
  const tags = rows.tags.map((row) => row.tag)
  const terms = rows.terms.map((row) => row.term)
  if (dialectOf(trx) === 'postgres') {
    const { rows: counted } = await trx.executeQuery<{ count: number | string }>(
      bind(POSTGRES_CREATE, { ...values, tags, terms, eventId: event.id, now, eventBody }),
    )
    countChanged(trx, accountId, Number(counted[0]?.count))
    return
  }
  await trx.executeQuery(bind(SQLITE.insertContact, values))
  await addToCountOnSqlite(trx, accountId, values.shard, 1)
  await writeIndexRows(trx, SQLITE.insertTags, accountId, contact.id, tags)
  await writeIndexRows(trx, SQLITE.insertTerms, accountId, contact.id, terms)
  await insertEventOnSqlite(trx, accountId, event.id, 'contact.created', now, eventBody)
}

/**
 * Writes a changed contact (locked by the caller): its row, the tags and terms it gained or lost,
 * and contact.updated. `before` are the rows of the contact as it was.
 */
export async function writeChangedContact(
  trx: Trx,
  accountId: string,
  before: ContactRows,
  after: ContactRows,
  now: string,
): Promise<void> {
  const { contact } = after
  const tags = difference(
    before.tags.map((row) => row.tag),
    after.tags.map((row) => row.tag),
  )
  const terms = difference(
    before.terms.map((row) => row.term),
    after.terms.map((row) => row.term),
  )
  const event = eventEnvelope('contact.updated', now)
  const eventBody = event.prefix + contact.body + event.suffix
  const values = {
    account: accountId,
    id: contact.id,
    emailLower: contact.email_lower,
    search: contact.search,
    updatedAt: contact.updated_at,
    body: contact.body,
  }
  if (dialectOf(trx) === 'postgres') {
    await trx.executeQuery(
      bind(POSTGRES_UPDATE, {
        ...values,
        removedTags: tags.removed,
        addedTags: tags.added,
        removedTerms: terms.removed,
        addedTerms: terms.added,
        eventId: event.id,
        now,
        eventBody,
      }),
    )
    return
  }
  await trx.executeQuery(bind(SQLITE.updateContact, values))
  await writeIndexRows(trx, SQLITE.deleteTags, accountId, contact.id, tags.removed)
  await writeIndexRows(trx, SQLITE.insertTags, accountId, contact.id, tags.added)
  await writeIndexRows(trx, SQLITE.deleteTerms, accountId, contact.id, terms.removed)
  await writeIndexRows(trx, SQLITE.insertTerms, accountId, contact.id, terms.added)
  await insertEventOnSqlite(trx, accountId, event.id, 'contact.updated', now, eventBody)
}

/**
 * Deletes the contact (its tag and term rows go by cascade), takes it from the count and records
 * contact.deleted with the contact as it was; false when the account has no such contact.
 */
export async function writeDeletedContact(
  trx: Trx,
  accountId: string,
  id: string,
  now: string,
): Promise<string | undefined> {
  const event = eventEnvelope('contact.deleted', now)
  const shard = countShard(trx)
  if (dialectOf(trx) === 'postgres') {
    const { rows } = await trx.executeQuery<{ body: string }>(
      bind(POSTGRES_DELETE, {
        account: accountId,
        id,
        shard,
        eventId: event.id,
        now,
        eventPrefix: event.prefix,
        eventSuffix: event.suffix,
      }),
    )
    const deleted = rows[0]
    if (deleted) {
      countChanged(trx, accountId)
    }
    return deleted?.body
  }
  const { rows } = await trx.executeQuery<{ body: string }>(bind(SQLITE.deleteContact, { account: accountId, id }))
  const deleted = rows[0]
  if (!deleted) {
    return undefined
  }
  await addToCountOnSqlite(trx, accountId, shard, -1)
  await insertEventOnSqlite(
    trx,
    accountId,
    event.id,
    'contact.deleted',
    now,
    event.prefix + deleted.body + event.suffix,
  )
  return deleted.body
}

/** What a set of values lost and gained: the rows to delete and to insert. */
function difference(before: string[], after: string[]): { removed: string[]; added: string[] } {
  const had = new Set(before)
  const has = new Set(after)
  return { removed: before.filter((value) => !has.has(value)), added: after.filter((value) => !had.has(value)) }
}

/** Inserts or deletes one contact's tag or term rows, given as a JSON array; none, no statement. */
async function writeIndexRows(
  trx: Trx,
  statement: (typeof SQLITE)['insertTags'],
  accountId: string,
  id: string,
  values: string[],
): Promise<void> {
  if (values.length > 0) {
    await trx.executeQuery(bind(statement, { account: accountId, id, values: JSON.stringify(values) }))
  }
}

async function addToCountOnSqlite(trx: Trx, accountId: string, shard: number, delta: number): Promise<void> {
  countChanged(trx, accountId)
  await trx.executeQuery(bind(SQLITE.addToCount, { account: accountId, shard, delta }))
}

/** The event at the next feed position (events/feed-position.ts). */
async function insertEventOnSqlite(
  trx: Trx,
  accountId: string,
  id: string,
  type: string,
  now: string,
  body: string,
): Promise<void> {
  const { rows } = await trx.executeQuery<{ last_position: number }>(bind(SQLITE.nextPosition, {}))
  const position = rows[0]?.last_position
  if (position === undefined) {
    throw new Error('event_sequence has no events row: are the migrations applied?')
  }
  await trx.executeQuery(bind(SQLITE.insertEvent, { account: accountId, id, position, type, now, body }))
}
