// The version of an account's contacts: what the ETag of a contacts list page stands for, read in
// one indexed lookup, so a poller's 304 reads no contact (docs/conditional-requests.md; a page's
// own bytes hashed cost the whole page query, bench/scenarios/conditional.ts has the figures).
//
// Every contact change records its event in its own transaction (DESIGN §12: no change without its
// event), so the account's newest feed position changes whenever its contacts do: the newest
// position, read with the query's own snapshot, stamps what the page is built from. A stamp equal
// to an earlier one must mean no contact change committed in between; positions make that so:
// - SQLite: positions are handed out in commit order (events/feed-position.ts), so a change
//   committed later always has a larger one.
// - PostgreSQL: the position is the writing transaction's id, taken before its commit, so a
//   transaction still open below the newest position could commit later and leave the newest
//   unchanged. The stamp therefore also names those transactions (the snapshot's in-progress ids
//   below it): once one of them ends, the stamp is different. Settled accounts (no such
//   transaction) have stamps that are the position alone, stable until the next change.
// The retention purge deletes events oldest first, so the newest stays while its account keeps
// any; an account with no event (none yet, or all purged) has no version, and its pages are tagged
// by their own bytes instead (contacts.routes.ts).
//
// A list page asked for without conditions (the usual request) on PostgreSQL gets its version from
// the page's own statement, as one more row (withVersionRow; contacts.list-query.ts): one round
// trip a page instead of two, the rows and the version from one snapshot. Measured with the builds
// before and after serving the same 20,000-contact account at once, wrk alternating between them
// in 3 s slots (8 each, load average 17-19 on 2 cores): 559 -> 515 us of CPU (server and backends)
// per page, -8 %. On SQLite the same union cost more than the second statement (169 -> 186 us,
// higher in 7 slots of 8: an in-process statement is cheap, the union's sort of the page is not),
// so there the version is still read alone. A poller's conditional request reads the version alone
// on both (contactsVersion), so its 304 reads no contact.
import { CompiledQuery } from 'kysely'
import { type Dialect, dialectOf } from '../db/dialect.js'
import type { Db } from '../db/transaction.js'

// Both served by events_account_position_idx (account_id, tx_id, id): the last entry of the account.
// The version as one value, null without events: SQLite's newest position; PostgreSQL's newest
// position and the statement's snapshot (pg_current_snapshot(), the one max() reads with).
const NEWEST: Record<Dialect, string> = {
  sqlite: 'max(tx_id)',
  postgres: "max(tx_id)::text || ' ' || pg_current_snapshot()::text",
}
const FROM_EVENTS = 'from events where account_id ='

/** Transaction ids the snapshot `xmin:xmax:xip,…` saw in progress, below `newest`. */
function openBelow(snapshot: string, newest: number): string {
  const [xmin, , xips = ''] = snapshot.split(':')
  if (Number(xmin) > newest || xips === '') {
    return '' // settled: every transaction below the newest position has ended
  }
  return xips
    .split(',')
    .filter((xip) => Number(xip) < newest)
    .join(',')
}

/** The version from the raw value the statements above give, or undefined without events. */
function versionOf(raw: unknown): string | undefined {
  if (raw === null || raw === undefined) {
    return undefined
  }
  const text = String(raw)
  const space = text.indexOf(' ')
  if (space < 0) {
    return text // SQLite: the position alone
  }
  const newest = text.slice(0, space)
  const open = openBelow(text.slice(space + 1), Number(newest))
  return open === '' ? newest : `${newest}/${open}`
}

/** The account's contacts version, or undefined when it has none (no event in the feed). */
export async function contactsVersion(db: Db, accountId: string): Promise<string | undefined> {
  const dialect = dialectOf(db)
  const text = `select ${NEWEST[dialect]} as newest ${FROM_EVENTS} ${dialect === 'sqlite' ? '?' : '$1'}`
  const { rows } = await db.executeQuery<{ newest: unknown }>(CompiledQuery.raw(text, [accountId]))
  return versionOf(rows[0]?.newest)
}

/**
 * A page's statement (columns id and body) with the account's version as one more row: id null,
 * body the version's raw value. The rows and the version come from one snapshot, in one round
 * trip. The account id is bound once more, after the page's `parameters`; the rows come out in
 * id order (`desc` or not), the version row wherever it sorts (takeVersionRow finds it).
 */
export function withVersionRow(pageSql: string, parameters: number, dialect: Dialect, desc: boolean): string {
  const param = dialect === 'sqlite' ? '?' : `$${parameters + 1}`
  return `select id, body from (${pageSql}) as page union all select null, ${NEWEST[dialect]} ${FROM_EVENTS} ${param} order by id ${desc ? 'desc' : 'asc'}`
}

/** Takes the version row out of a withVersionRow statement's rows; the version, or undefined without events. */
export function takeVersionRow(rows: Array<{ id: string | null; body: unknown }>): string | undefined {
  const at = rows.at(-1)?.id === null ? rows.length - 1 : rows.findIndex((row) => row.id === null)
  if (at < 0) {
    throw new Error('list page: the statement returned no version row')
  }
  const [row] = rows.splice(at, 1)
  return versionOf(row?.body)
}
