// PostgreSQL's contact writer (contact-writes.ts): one statement per group of changes, a
// data-modifying CTE. Its parts see one snapshot and check foreign keys at its end, so a new
// contact's tag rows can name it in the same statement. A group of one contact has its own texts,
// keyed on the contact's id: why, docs/design.md, "SQL statements".
import { bind, rawSql, sqlFor } from '../db/statement.js'
import { eventBody, type NewEvent } from '../events/events.js'
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
  type UpdatePair,
} from './contact-writes.rows.js'
import { type ContactRows, searchTerms } from './contacts.js'

const postgres = sqlFor('postgres')
const position = rawSql(POSTGRES_EVENT_POSITION)

/** The count it returns is the count before the statement (the transaction's earlier changes in it) + n. */
const POSTGRES_CREATE = postgres`
  with contact as (
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    select ${'account'}, r.id, r.email_lower, r.search, r.created_at, r.updated_at, r.body
    from unnest(${'ids'}::text[], ${'emails'}::text[], ${'searches'}::text[], ${'createdAt'}::text[],
      ${'updatedAt'}::text[], ${'bodies'}::text[]) as r(id, email_lower, search, created_at, updated_at, body)
  ), tags as (
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, r.tag, r.contact_id from unnest(${'tags'}::text[], ${'tagContacts'}::text[]) as r(tag, contact_id)
  ), terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, r.term, r.contact_id from unnest(${'terms'}::text[], ${'termContacts'}::text[]) as r(term, contact_id)
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
    select ${'account'}, r.tag, r.contact_id
    from unnest(${'addedTags'}::text[], ${'addedTagContacts'}::text[]) as r(tag, contact_id)
  ), removed_terms as (
    delete from contact_terms t using unnest(${'removedTerms'}::text[], ${'removedTermContacts'}::text[]) as r(term, contact_id)
    where t.account_id = ${'account'} and t.term = r.term and t.contact_id = r.contact_id
  ), added_terms as (
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, r.term, r.contact_id
    from unnest(${'addedTerms'}::text[], ${'addedTermContacts'}::text[]) as r(term, contact_id)
  )
  insert into events (account_id, id, tx_id, type, created_at, body)
  select ${'account'}, id, ${position}, 'contact.updated', ${'now'}, body
  from unnest(${'eventIds'}::text[], ${'eventBodies'}::text[]) as e(id, body)`

/** POSTGRES_CREATE for one contact. */
const POSTGRES_CREATE_ONE = postgres`
  with contact as (
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    values (${'account'}, ${'id'}, ${'email'}, ${'search'}, ${'createdAt'}, ${'updatedAt'}, ${'body'})
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

/** POSTGRES_UPDATE for one contact. */
const POSTGRES_UPDATE_ONE = postgres`
  with contact as (
    update contacts set email_lower = ${'email'}, search = ${'search'}, updated_at = ${'updatedAt'}, body = ${'body'}
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

/** POSTGRES_DELETE for one contact. */
const POSTGRES_DELETE_ONE = postgres`
  with contact as (
    delete from contacts where account_id = ${'account'} and id = ${'id'} returning id, body
  ), counted as (
    insert into contact_counts (account_id, shard, n) select ${'account'}, ${'shard'}::integer, -1 from contact
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    select ${'account'}, ${'eventId'}, ${position}, 'contact.deleted', ${'now'}, ${'eventPrefix'} || body || ${'eventSuffix'}
    from contact
  )
  select id, body from contact`

/** Tag and term rows go by cascade; the event splices in each deleted body. */
const POSTGRES_DELETE = postgres`
  with contact as (
    delete from contacts where account_id = ${'account'} and id = any(${'ids'}::text[]) returning id, body
  ), counted as (
    insert into contact_counts (account_id, shard, n)
    select ${'account'}, ${'shard'}::integer, -count(id) from contact having count(id) > 0
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
    const [row, event] = [rows[0] as ContactRows, events[0] as NewEvent]
    const query =
      rows.length === 1
        ? bind(POSTGRES_CREATE_ONE, {
            account: accountId,
            ...contactValues(row),
            createdAt: row.contact.created_at,
            tags: firsts(tags),
            terms: firsts(terms),
            shard,
            now,
            eventId: event.id,
            eventBody: eventBody(event, row.contact.body),
          })
        : bind(POSTGRES_CREATE, {
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
          })
    const { rows: counted } = await trx.executeQuery<{ count: number | string }>(query)
    return Number(counted[0]?.count)
  },
  async update(trx, { accountId, now }, pairs, events) {
    const { ids, emails, searches, updatedAt, bodies } = contactColumns(pairs.map((pair) => pair.rows))
    const tags = changedPairs(pairs, tagsOf)
    const terms = changedPairs(pairs, searchTerms)
    const [pair, event] = [pairs[0] as UpdatePair, events[0] as NewEvent]
    const query =
      pairs.length === 1
        ? bind(POSTGRES_UPDATE_ONE, {
            account: accountId,
            ...contactValues(pair.rows),
            removedTags: firsts(tags.removed),
            addedTags: firsts(tags.added),
            removedTerms: firsts(terms.removed),
            addedTerms: firsts(terms.added),
            now,
            eventId: event.id,
            eventBody: eventBody(event, pair.rows.contact.body),
          })
        : bind(POSTGRES_UPDATE, {
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
          })
    await trx.executeQuery(query)
  },
  async remove(trx, { accountId, shard, now }, ids, events) {
    const event = events[0] as NewEvent
    const eventSuffix = events[0]?.suffix ?? ''
    const query =
      ids.length === 1
        ? bind(POSTGRES_DELETE_ONE, {
            account: accountId,
            id: ids[0],
            shard,
            now,
            eventId: event.id,
            eventPrefix: event.prefix,
            eventSuffix,
          })
        : bind(POSTGRES_DELETE, {
            account: accountId,
            ids,
            shard,
            now,
            eventIds: events.map((event) => event.id),
            eventPrefixes: events.map((event) => event.prefix),
            eventSuffix,
          })
    const { rows } = await trx.executeQuery<{ id: string; body: string }>(query)
    return new Map(rows.map((row) => [row.id, row.body]))
  },
}

/** One contact's columns, for the single-contact statements. */
function contactValues({ contact }: ContactRows) {
  return {
    id: contact.id,
    email: contact.email_lower,
    search: contact.search,
    updatedAt: contact.updated_at,
    body: contact.body,
  }
}
