// The version of an account's contacts: what a contacts list page's ETag stands for, read in one
// indexed lookup so that a poller's 304 reads no contact. It is the account's newest feed position
// (every contact change writes an event), and on PostgreSQL also the transactions still open below
// it, which could yet commit there. Why that is exact: docs/design.md, "Contacts list version".
import { dialectOf } from '../db/dialect.js'
import { bind, sqlFor } from '../db/statement.js'
import type { Db } from '../db/transaction.js'

// Both served by events_account_position_idx (account_id, tx_id, id): the last entry of the account.
const SQLITE_NEWEST = sqlFor('sqlite')`select max(tx_id) as newest from events where account_id = ${'account'}`
// pg_current_snapshot() is the statement's snapshot, the one max() reads with.
const POSTGRES_NEWEST = sqlFor('postgres')`
  select max(tx_id) as newest, pg_current_snapshot()::text as snapshot from events where account_id = ${'account'}`

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
    const { rows } = await db.executeQuery<{ newest: number | null }>(bind(SQLITE_NEWEST, { account: accountId }))
    const newest = rows[0]?.newest
    return newest === null || newest === undefined ? undefined : String(newest)
  }
  const { rows } = await db.executeQuery<{ newest: number | null; snapshot: string }>(
    bind(POSTGRES_NEWEST, { account: accountId }),
  )
  const row = rows[0]
  if (row === undefined || row.newest === null) {
    return undefined
  }
  const open = openBelow(row.snapshot, row.newest)
  return open === '' ? String(row.newest) : `${row.newest}/${open}`
}
