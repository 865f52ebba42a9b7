// How the rows of one contact are written: the contact, its tag and term rows, the account's count
// and the change's event, in the caller's transaction. contacts.store.ts decides what to write.
//
// PostgreSQL: each write is one statement, a data-modifying CTE. Every statement is a round trip,
// and the transaction holds its pooled connection and its row locks (the contact, the count's
// shard) across all of them: a create was BEGIN, six statements and COMMIT, eight round trips; now
// BEGIN, one, COMMIT (the quota check reads the count the statement returns); an update four
// instead of five to nine, a delete three instead of five (docs/performance.md, "Writes on
// PostgreSQL"). The sub-statements see one snapshot and fire foreign-key checks at the statement's
// end, so the tag and term rows of a new contact can name it.
// SQLite: a statement is a function call, not a round trip; one per table.
import { sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Trx } from '../db/transaction.js'
import { eventEnvelope, recordEvent } from '../events/events.js'
import { newEventPosition } from '../events/feed-position.js'
import { addToContactCount, countChanged, countShard } from './contact-count.js'
import type { ContactRows } from './contacts.js'
import type { ContactTagsTable, ContactTermsTable } from './contacts.table.js'

/** Writes a new contact's rows, adds it to the count and records contact.created. */
export async function writeNewContact(trx: Trx, accountId: string, rows: ContactRows, now: string): Promise<void> {
  const contact = rows.contact
  if (dialectOf(trx) === 'sqlite') {
    await trx.insertInto('contacts').values(contact).execute()
    await addToContactCount(trx, accountId, 1)
    await insertIndexRows(trx, 'contact_tags', rows.tags)
    await insertIndexRows(trx, 'contact_terms', rows.terms)
    await recordEvent(trx, accountId, 'contact.created', contact.body, now)
    return
  }
  const event = eventEnvelope('contact.created', now)
  // The count before this statement (the transaction's own earlier changes included) plus this one.
  const { rows: counted } = await sql<{ count: number | string }>`
    with contact as (
      insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
      values (${accountId}, ${contact.id}, ${contact.email_lower}, ${contact.search}, ${contact.created_at},
        ${contact.updated_at}, ${contact.body})
    ), tags as (
      insert into contact_tags (account_id, tag, contact_id)
      select ${accountId}, tag, ${contact.id} from unnest(${rows.tags.map((row) => row.tag)}::text[]) as tag
    ), terms as (
      insert into contact_terms (account_id, term, contact_id)
      select ${accountId}, term, ${contact.id} from unnest(${rows.terms.map((row) => row.term)}::text[]) as term
    ), counted as (
      insert into contact_counts (account_id, shard, n) values (${accountId}, ${countShard()}, 1)
      on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
    ), event as (
      insert into events (account_id, id, tx_id, type, created_at, body)
      values (${accountId}, ${event.id}, ${await newEventPosition(trx)}, ${'contact.created'}, ${now},
        ${event.prefix + contact.body + event.suffix})
    )
    select (coalesce(sum(n), 0) + 1)::bigint as count from contact_counts where account_id = ${accountId}`.execute(trx)
  countChanged(trx, accountId, Number(counted[0]?.count))
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
  const { id, email_lower, search, updated_at, body } = after.contact
  const tags = difference(
    before.tags.map((row) => row.tag),
    after.tags.map((row) => row.tag),
  )
  const terms = difference(
    before.terms.map((row) => row.term),
    after.terms.map((row) => row.term),
  )
  if (dialectOf(trx) === 'sqlite') {
    await trx
      .updateTable('contacts')
      .set({ email_lower, search, updated_at, body })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .execute()
    if (tags.removed.length > 0) {
      await trx
        .deleteFrom('contact_tags')
        .where('account_id', '=', accountId)
        .where('contact_id', '=', id)
        .where('tag', 'in', tags.removed)
        .execute()
    }
    await insertIndexRows(
      trx,
      'contact_tags',
      tags.added.map((tag) => ({ account_id: accountId, tag, contact_id: id })),
    )
    if (terms.removed.length > 0) {
      await trx
        .deleteFrom('contact_terms')
        .where('account_id', '=', accountId)
        .where('contact_id', '=', id)
        .where('term', 'in', terms.removed)
        .execute()
    }
    await insertIndexRows(
      trx,
      'contact_terms',
      terms.added.map((term) => ({ account_id: accountId, term, contact_id: id })),
    )
    await recordEvent(trx, accountId, 'contact.updated', body, now)
    return
  }
  const event = eventEnvelope('contact.updated', now)
  await sql`
    with contact as (
      update contacts set email_lower = ${email_lower}, search = ${search}, updated_at = ${updated_at}, body = ${body}
      where account_id = ${accountId} and id = ${id}
    ), removed_tags as (
      delete from contact_tags
      where account_id = ${accountId} and contact_id = ${id} and tag = any(${tags.removed}::text[])
    ), added_tags as (
      insert into contact_tags (account_id, tag, contact_id)
      select ${accountId}, tag, ${id} from unnest(${tags.added}::text[]) as tag
    ), removed_terms as (
      delete from contact_terms
      where account_id = ${accountId} and contact_id = ${id} and term = any(${terms.removed}::text[])
    ), added_terms as (
      insert into contact_terms (account_id, term, contact_id)
      select ${accountId}, term, ${id} from unnest(${terms.added}::text[]) as term
    )
    insert into events (account_id, id, tx_id, type, created_at, body)
    values (${accountId}, ${event.id}, ${await newEventPosition(trx)}, ${'contact.updated'}, ${now},
      ${event.prefix + body + event.suffix})`.execute(trx)
}

/**
 * Deletes the contact (its tag and term rows go by cascade), takes it from the count and records
 * contact.deleted with the contact as it was; false when the account has no such contact.
 */
export async function writeDeletedContact(trx: Trx, accountId: string, id: string, now: string): Promise<boolean> {
  if (dialectOf(trx) === 'sqlite') {
    const deleted = await trx
      .deleteFrom('contacts')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning('body')
      .executeTakeFirst()
    if (!deleted) {
      return false
    }
    await addToContactCount(trx, accountId, -1)
    await recordEvent(trx, accountId, 'contact.deleted', deleted.body, now)
    return true
  }
  const event = eventEnvelope('contact.deleted', now)
  const { rows } = await sql<{ deleted: number }>`
    with contact as (
      delete from contacts where account_id = ${accountId} and id = ${id} returning body
    ), counted as (
      insert into contact_counts (account_id, shard, n) select ${accountId}, ${countShard()}, -1 from contact
      on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
    ), event as (
      insert into events (account_id, id, tx_id, type, created_at, body)
      select ${accountId}, ${event.id}, ${await newEventPosition(trx)}, ${'contact.deleted'}, ${now},
        ${event.prefix} || body || ${event.suffix}
      from contact
    )
    select 1 as deleted from contact`.execute(trx)
  if (rows.length === 0) {
    return false
  }
  countChanged(trx, accountId)
  return true
}

/** What a set of values lost and gained: the rows to delete and to insert. */
function difference(before: string[], after: string[]): { removed: string[]; added: string[] } {
  const had = new Set(before)
  const has = new Set(after)
  return { removed: before.filter((value) => !has.has(value)), added: after.filter((value) => !had.has(value)) }
}

async function insertIndexRows(
  trx: Trx,
  table: 'contact_tags' | 'contact_terms',
  rows: ContactTagsTable[] | ContactTermsTable[],
): Promise<void> {
  if (rows.length > 0) {
    await trx.insertInto(table).values(rows).execute()
  }
}
