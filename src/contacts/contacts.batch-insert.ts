// The writes of a batch's run of creates, as SQL text kept per row count instead of Kysely-built
// multi-row INSERTs. The rows, the count and the events (in order) are those POST /contacts writes
// one by one; contacts.batch-insert.test.ts compares them.
//
// What it buys (100,000 contacts by 4 clients through `serve`, server CPU per contact, paired runs):
// SQLite 124 → 117 µs, PostgreSQL 89 → 81 µs. Kysely parsed and compiled five multi-row statements
// per batch (about 1,300 values); here the text of an INSERT of n rows is built once, and the same
// text lets the SQLite statement cache (db/database.ts) reuse its prepared statement. Figures and
// how they were measured: docs/batch.md.
import { CompiledQuery } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Trx } from '../db/transaction.js'
import { newEventPosition } from '../events/feed-position.js'
import { newId } from '../lib/ids.js'
import { addToContactCount } from './contact-count.js'
import { toContactRows } from './contacts.js'
import type { Contact } from './contacts.schemas.js'
import type { StoredContact } from './contacts.store.js'

type Value = string | number | null

/** Rows per statement: below both dialects' bound-parameter limits (SQLite 32,766, PostgreSQL 65,535). */
const CHUNK_ROWS = 500

/** A literal SQL expression in a row, in place of a bound parameter (PostgreSQL's event position). */
interface Raw {
  raw: string
}

const texts = new Map<string, string>()

/**
 * `insert into table (columns) values (…), (…)` for these rows: placeholders for the values,
 * `Raw` expressions written in. Kept per shape, so each is built once and each run of SQLite's
 * statement cache finds its prepared statement.
 */
function insertText(
  postgres: boolean,
  table: string,
  columns: readonly string[],
  rows: number,
  raw: Array<Raw | undefined>,
): string {
  const key = `${postgres ? 'p' : 's'}|${table}|${rows}|${raw.map((r) => r?.raw ?? '').join('|')}`
  let text = texts.get(key)
  if (text === undefined) {
    let n = 0
    const tuple = () => `(${raw.map((r) => r?.raw ?? (postgres ? `$${++n}` : '?')).join(', ')})`
    const tuples: string[] = []
    for (let i = 0; i < rows; i++) {
      tuples.push(tuple())
    }
    text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(', ')}) values ${tuples.join(', ')}`
    // A handful of shapes per table (row counts up to CHUNK_ROWS): bounded.
    if (texts.size < 10_000) {
      texts.set(key, text)
    }
  }
  return text
}

/** Inserts `rows` (one array of values per row, in `columns` order), CHUNK_ROWS at a time. */
async function insertRows(
  trx: Trx,
  postgres: boolean,
  table: string,
  columns: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<Value | Raw>>,
): Promise<void> {
  for (let start = 0; start < rows.length; start += CHUNK_ROWS) {
    const chunk = rows.slice(start, start + CHUNK_ROWS)
    const first = chunk[0] as ReadonlyArray<Value | Raw>
    const raw = first.map((value) => (isRaw(value) ? value : undefined))
    const parameters: Value[] = []
    for (const row of chunk) {
      for (const value of row) {
        if (!isRaw(value)) {
          parameters.push(value)
        }
      }
    }
    await trx.executeQuery(CompiledQuery.raw(insertText(postgres, table, columns, chunk.length, raw), parameters))
  }
}

const isRaw = (value: Value | Raw): value is Raw => value !== null && typeof value === 'object'

/** (account, value, contact id) rows in their primary key's order (code point order, as SQLite's BINARY collation). */
const byIndexKey = (a: string[], b: string[]) => {
  const [x, y] = [a[1] as string, b[1] as string]
  return x < y ? -1 : x > y ? 1 : (a[2] as string) < (b[2] as string) ? -1 : 1
}

const CONTACT_COLUMNS = ['account_id', 'id', 'email_lower', 'search', 'created_at', 'updated_at', 'body'] as const
const INDEX_COLUMNS = ['account_id', 'tag', 'contact_id'] as const
const TERM_COLUMNS = ['account_id', 'term', 'contact_id'] as const
const EVENT_COLUMNS = ['account_id', 'id', 'tx_id', 'type', 'created_at', 'body'] as const

/**
 * Inserts contacts already built (their emails free), the same rows POST /contacts would write:
 * the contacts, the count, their tags, their terms (each table's rows in key order), one
 * `contact.created` event each in the order given (one feed position, ids in order, bodies as
 * recordEvents writes them).
 */
export async function insertContactRun(
  trx: Trx,
  accountId: string,
  contacts: readonly Contact[],
  now: string,
): Promise<StoredContact[]> {
  if (contacts.length === 0) {
    return []
  }
  const rows = contacts.map((contact) => toContactRows(accountId, contact))
  const postgres = dialectOf(trx) === 'postgres'
  await insertRows(
    trx,
    postgres,
    'contacts',
    CONTACT_COLUMNS,
    rows.map(({ contact: c }) => [c.account_id, c.id, c.email_lower, c.search, c.created_at, c.updated_at, c.body]),
  )
  await addToContactCount(trx, accountId, contacts.length)
  const tags = rows.flatMap((row) => row.tags.map((t) => [t.account_id, t.tag, t.contact_id])).sort(byIndexKey)
  await insertRows(trx, postgres, 'contact_tags', INDEX_COLUMNS, tags)
  const terms = rows.flatMap((row) => row.terms.map((t) => [t.account_id, t.term, t.contact_id])).sort(byIndexKey)
  await insertRows(trx, postgres, 'contact_terms', TERM_COLUMNS, terms)
  const txId = await newEventPosition(trx)
  // PostgreSQL's position is the transaction's id, an expression (feed-position.ts).
  const position: Value | Raw = typeof txId === 'number' ? txId : { raw: 'pg_current_xact_id()::text::bigint' }
  const type = 'contact.created'
  const quotedNow = JSON.stringify(now)
  await insertRows(
    trx,
    postgres,
    'events',
    EVENT_COLUMNS,
    rows.map(({ contact: c }) => {
      const id = newId('event')
      // recordEvent's body: the stored contact spliced in, not serialized again.
      const body = `{"object":"event","id":${JSON.stringify(id)},"type":"${type}","created_at":${quotedNow},"data":{"object":${c.body}}}`
      return [accountId, id, position, type, now, body]
    }),
  )
  return contacts.map((contact, i) => ({ contact, body: rows[i]?.contact.body as string }))
}
