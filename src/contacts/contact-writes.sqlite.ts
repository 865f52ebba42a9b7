// SQLite's contact writer (contact-writes.ts): statements are function calls, not round trips,
// so a group of changes is one statement per table, its rows given as a JSON array (json_each).
import { bind, sqlFor } from '../db/statement.js'
import type { Trx } from '../db/transaction.js'
import { eventBody, type NewEvent } from '../events/events.js'
import { insertEvents } from '../events/events.store.js'
import {
  changedPairs,
  contactColumns,
  type DialectWriter,
  tagPairs,
  tagsOf,
  termPairs,
  type UpdatePair,
} from './contact-writes.rows.js'
import { searchTerms } from './contacts.js'

const sqlite = sqlFor('sqlite')
const SQLITE = {
  insertContacts: sqlite`
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    select ${'account'}, value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5
    from json_each(${'rows'})`,
  /** insertContacts for one contact: no JSON to build and parse on the path of every POST. */
  insertContact: sqlite`
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    values (${'account'}, ${'id'}, ${'emailLower'}, ${'search'}, ${'createdAt'}, ${'updatedAt'}, ${'body'})`,
  /** One contact per call: SQLite plans an UPDATE … FROM json_each as a walk of the account. */
  updateContact: sqlite`
    update contacts set email_lower = ${'emailLower'}, search = ${'search'}, updated_at = ${'updatedAt'}, body = ${'body'}
    where account_id = ${'account'} and id = ${'id'}`,
  deleteContacts: sqlite`
    delete from contacts where account_id = ${'account'} and id in (select value from json_each(${'ids'}))
    returning id, body`,
  addToCount: sqlite`
    insert into contact_counts (account_id, shard, n) values (${'account'}, ${'shard'}, ${'delta'})
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n`,
  insertTags: sqlite`
    insert into contact_tags (account_id, tag, contact_id)
    select ${'account'}, value ->> 0, value ->> 1 from json_each(${'pairs'})`,
  deleteTags: sqlite`
    delete from contact_tags
    where account_id = ${'account'} and (tag, contact_id) in (select value ->> 0, value ->> 1 from json_each(${'pairs'}))`,
  insertTerms: sqlite`
    insert into contact_terms (account_id, term, contact_id)
    select ${'account'}, value ->> 0, value ->> 1 from json_each(${'pairs'})`,
  deleteTerms: sqlite`
    delete from contact_terms
    where account_id = ${'account'} and (term, contact_id) in (select value ->> 0, value ->> 1 from json_each(${'pairs'}))`,
}

type PairStatement = (typeof SQLITE)['insertTags']

/** Inserts or deletes tag or term rows; none, no statement. */
async function writePairs(trx: Trx, statement: PairStatement, accountId: string, pairs: Array<[string, string]>) {
  if (pairs.length > 0) {
    await trx.executeQuery(bind(statement, { account: accountId, pairs: JSON.stringify(pairs) }))
  }
}

async function addToCountOnSqlite(trx: Trx, accountId: string, shard: number, delta: number): Promise<void> {
  if (delta !== 0) {
    await trx.executeQuery(bind(SQLITE.addToCount, { account: accountId, shard, delta }))
  }
}

export const SQLITE_WRITER: DialectWriter = {
  async create(trx, { accountId, shard, now }, rows, events) {
    const c = contactColumns(rows)
    const [one] = rows
    if (rows.length === 1 && one) {
      const { id, email_lower: emailLower, search, created_at: createdAt, updated_at: updatedAt, body } = one.contact
      await trx.executeQuery(
        bind(SQLITE.insertContact, { account: accountId, id, emailLower, search, createdAt, updatedAt, body }),
      )
    } else {
      const table = c.ids.map((id, i) => [id, c.emails[i], c.searches[i], c.createdAt[i], c.updatedAt[i], c.bodies[i]])
      await trx.executeQuery(bind(SQLITE.insertContacts, { account: accountId, rows: JSON.stringify(table) }))
    }
    await addToCountOnSqlite(trx, accountId, shard, rows.length)
    await writePairs(trx, SQLITE.insertTags, accountId, tagPairs(rows))
    await writePairs(trx, SQLITE.insertTerms, accountId, termPairs(rows))
    await insertEvents(
      trx,
      accountId,
      now,
      'contact.created',
      events.map((event, i) => [event.id, eventBody(event, c.bodies[i] as string)]),
    )
    return undefined
  },
  async update(trx, { accountId, now }, pairs, events) {
    for (const { rows } of pairs) {
      const { id, email_lower: emailLower, search, updated_at: updatedAt, body } = rows.contact
      await trx.executeQuery(
        bind(SQLITE.updateContact, { account: accountId, id, emailLower, search, updatedAt, body }),
      )
    }
    const tags = changedPairs(pairs, tagsOf)
    const terms = changedPairs(pairs, searchTerms)
    await writePairs(trx, SQLITE.deleteTags, accountId, tags.removed)
    await writePairs(trx, SQLITE.insertTags, accountId, tags.added)
    await writePairs(trx, SQLITE.deleteTerms, accountId, terms.removed)
    await writePairs(trx, SQLITE.insertTerms, accountId, terms.added)
    await insertEvents(
      trx,
      accountId,
      now,
      'contact.updated',
      events.map((event, i) => [event.id, eventBody(event, (pairs[i] as UpdatePair).rows.contact.body)]),
    )
  },
  async remove(trx, { accountId, shard, now }, ids, events) {
    const { rows } = await trx.executeQuery<{ id: string; body: string }>(
      bind(SQLITE.deleteContacts, { account: accountId, ids: JSON.stringify(ids) }),
    )
    const deleted = new Map(rows.map((row) => [row.id, row.body]))
    await addToCountOnSqlite(trx, accountId, shard, -deleted.size)
    const written: Array<[string, string]> = []
    ids.forEach((id, i) => {
      const body = deleted.get(id)
      const event = events[i] as NewEvent
      if (body !== undefined) {
        written.push([event.id, eventBody(event, body)])
      }
    })
    await insertEvents(trx, accountId, now, 'contact.deleted', written)
    return deleted
  },
}
