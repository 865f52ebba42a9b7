// PostgreSQL's contact writer (contact-writes.ts): one statement per group of changes, a
// data-modifying CTE. Its parts see one snapshot and check foreign keys at its end, so a new
// contact's tag rows can name it in the same statement.
import { bind, rawSql, sqlFor } from '../db/statement.js'
import { eventBody } from '../events/events.js'
import { POSTGRES_EVENT_POSITION } from '../events/feed-position.js'
import {
  changedPairs,
  contactColumns,
  type DialectWriter,
  firsts,
  seconds,
  tagPairs,
  tagsOf,
  termPairs,
} from './contact-writes.rows.js'
import { type ContactRows, searchTerms } from './contacts.js'

const postgres = sqlFor('postgres')
const position = rawSql(POSTGRES_EVENT_POSITION)

/** The count it returns is the count before the statement (the transaction's earlier changes in it) + n. */
const POSTGRES_CREATE = postgres`
  with contact as (
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    select ${'account'}, * from unnest(${'ids'}::text[], ${'emails'}::text[], ${'searches'}::text[],
      ${'createdAt'}::text[], ${'updatedAt'}::text[], ${'bodies'}::text[])
  ), tags as (
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, * from unnest(${'tags'}::text[], ${'tagContacts'}::text[])
  ), terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, * from unnest(${'terms'}::text[], ${'termContacts'}::text[])
  ), counted as (
    insert into contact_counts (account_id, shard, n) values (${'account'}, ${'shard'}, ${'created'})
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, id, ${position}, 'contact.created', ${'now'}, body
    from unnest(${'eventIds'}::text[], ${'eventBodies'}::text[]) as e(id, body)
  )
  select (coalesce(sum(n), 0) + ${'created'})::bigint as count from contact_counts where account_id = ${'account'}`

const POSTGRES_UPDATE = postgres`
  with contact as (
    update contacts c set email_lower = u.email_lower, search = u.search, updated_at = u.updated_at, body = u.body
    from unnest(${'ids'}::text[], ${'emails'}::text[], ${'searches'}::text[], ${'updatedAt'}::text[],
      ${'bodies'}::text[]) as u(id, email_lower, search, updated_at, body)
    where c.account_id = ${'account'} and c.id = u.id
  ), removed_tags as (
    delete from contact_tags t using unnest(${'removedTags'}::text[], ${'removedTagContacts'}::text[]) as r(tag, contact_id)
    where t.account_id = ${'account'} and t.tag = r.tag and t.contact_id = r.contact_id
  ), added_tags as (
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, * from unnest(${'addedTags'}::text[], ${'addedTagContacts'}::text[])
  ), removed_terms as (
    delete from contact_terms t using unnest(${'removedTerms'}::text[], ${'removedTermContacts'}::text[]) as r(term, contact_id)
    where t.account_id = ${'account'} and t.term = r.term and t.contact_id = r.contact_id
  ), added_terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, * from unnest(${'addedTerms'}::text[], ${'addedTermContacts'}::text[])
  )
  insert into events (account_id, id, tx_id, type, created_at, body)
  select ${'account'}, id, ${position}, 'contact.updated', ${'now'}, body
  from unnest(${'eventIds'}::text[], ${'eventBodies'}::text[]) as e(id, body)`

/** Tag and term rows go by cascade; the event splices in each deleted body. */
const POSTGRES_DELETE = postgres`
  with contact as (
    delete from contacts where account_id = ${'account'} and id = any(${'ids'}::text[]) returning id, body
  ), counted as (
    insert into contact_counts (account_id, shard, n)
    select ${'account'}, ${'shard'}::integer, -count(*) from contact having count(*) > 0
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, e.id, ${position}, 'contact.deleted', ${'now'}, e.prefix || c.body || ${'eventSuffix'}
    from contact c join unnest(${'ids'}::text[], ${'eventIds'}::text[], ${'eventPrefixes'}::text[])
      as e(contact_id, id, prefix) on e.contact_id = c.id
  )
  select id, body from contact`

export const POSTGRES_WRITER: DialectWriter = {
  async create(trx, { accountId, shard, now }, rows, events) {
    const tags = tagPairs(rows)
    const terms = termPairs(rows)
    const { rows: counted } = await trx.executeQuery<{ count: number | string }>(
      bind(POSTGRES_CREATE, {
        account: accountId,
        ...contactColumns(rows),
        tags: firsts(tags),
        tagContacts: seconds(tags),
        terms: firsts(terms),
        termContacts: seconds(terms),
        shard,
        created: rows.length,
        now,
        eventIds: events.map((event) => event.id),
        eventBodies: events.map((event, i) => eventBody(event, (rows[i] as ContactRows).contact.body)),
      }),
    )
    return Number(counted[0]?.count)
  },
  async update(trx, { accountId, now }, pairs, events) {
    const { ids, emails, searches, updatedAt, bodies } = contactColumns(pairs.map((pair) => pair.rows))
    const tags = changedPairs(pairs, tagsOf)
    const terms = changedPairs(pairs, searchTerms)
    await trx.executeQuery(
      bind(POSTGRES_UPDATE, {
        account: accountId,
        ids,
        emails,
        searches,
        updatedAt,
        bodies,
        removedTags: firsts(tags.removed),
        removedTagContacts: seconds(tags.removed),
        addedTags: firsts(tags.added),
        addedTagContacts: seconds(tags.added),
        removedTerms: firsts(terms.removed),
        removedTermContacts: seconds(terms.removed),
        addedTerms: firsts(terms.added),
        addedTermContacts: seconds(terms.added),
        now,
        eventIds: events.map((event) => event.id),
        eventBodies: events.map((event, i) => eventBody(event, bodies[i] as string)),
      }),
    )
  },
  async remove(trx, { accountId, shard, now }, ids, events) {
    const { rows } = await trx.executeQuery<{ id: string; body: string }>(
      bind(POSTGRES_DELETE, {
        account: accountId,
        ids,
        shard,
        now,
        eventIds: events.map((event) => event.id),
        eventPrefixes: events.map((event) => event.prefix),
        eventSuffix: events[0]?.suffix ?? '',
      }),
    )
    return new Map(rows.map((row) => [row.id, row.body]))
  },
}
