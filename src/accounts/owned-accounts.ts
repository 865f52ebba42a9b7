// The limit on accounts one person owns (MAX_ACCOUNTS_PER_PERSON), so sign-up cannot mint tenants
// without end. Not serialized: concurrent creations by one person can overshoot it by a few.
import type { Db } from '../db/transaction.js'
import { AppError } from '../http/errors.js'

export async function countOwnedAccounts(db: Db, userId: string): Promise<number> {
  const row = await db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll().as('count'))
    .where('user_id', '=', userId)
    .where('role', '=', 'owner')
    .executeTakeFirst()
  return Number(row?.count ?? 0)
}

/** Throws quota_exceeded (403) when the person already owns `max` accounts. */
export async function assertMayOwnAnother(db: Db, userId: string, max: number): Promise<void> {
  if ((await countOwnedAccounts(db, userId)) >= max) {
    throw new AppError('quota_exceeded', `You already own ${max} accounts, the most one person may own.`)
  }
}
