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
import { CompiledQuery } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Db } from '../db/transaction.js'

// Both served by events_account_position_idx (account_id, tx_id, id): the last entry of the account.
const SQLITE_NEWEST = 'select max(tx_id) as newest from events where account_id = ?'
// pg_current_snapshot() is the statement's snapshot, the one max() reads with.
const POSTGRES_NEWEST =
  'select max(tx_id) as newest, pg_current_snapshot()::text as snapshot from events where account_id = $1'

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

/** The account's contacts version, or undefined when it has none (no event in the feed). */
export async function contactsVersion(db: Db, accountId: string): Promise<string | undefined> {
  if (dialectOf(db) === 'sqlite') {
    const { rows } = await db.executeQuery<{ newest: number | null }>(CompiledQuery.raw(SQLITE_NEWEST, [accountId]))
    const newest = rows[0]?.newest
    return newest === null || newest === undefined ? undefined : String(newest)
  }
  const { rows } = await db.executeQuery<{ newest: number | null; snapshot: string }>(
    CompiledQuery.raw(POSTGRES_NEWEST, [accountId]),
  )
  const row = rows[0]
  if (row === undefined || row.newest === null) {
    return undefined
  }
  const open = openBelow(row.snapshot, row.newest)
  return open === '' ? String(row.newest) : `${row.newest}/${open}`
}
