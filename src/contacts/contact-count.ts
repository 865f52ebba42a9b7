// How many contacts an account has, for MAX_CONTACTS_PER_ACCOUNT (DESIGN §2), without a hot row:
// the count is spread over COUNT_SHARDS rows per account. A transaction adds its +1s and -1s to one
// of them, chosen at random once per transaction (countShard; the statements are contact-writes.ts's
// and addToContactCount), so concurrent writers rarely meet on the same row; a read sums them. The
// count is exact; the quota check is not serialized: a transaction sees its own increments and those
// committed, so concurrent creates can overshoot the quota by at most the number of create
// transactions of the account in flight at once (bounded by the database pool: 10 per instance on
// PostgreSQL; none on SQLite, where writes are serial).
import { randomInt } from 'node:crypto'
import { sql } from 'kysely'
import type { Db, Trx } from '../db/transaction.js'
import { AppError } from '../http/errors.js'

/**
 * Enough that concurrent writers of one account rarely wait for each other's commit on a shard: with
 * 8, the write mix on PostgreSQL (bench:writes, 10 pooled connections) had a backend waiting on a
 * row lock 10 % of the time (34 % with 20 connections); with 64, 1.6 % (5 %). A count reads 64 rows
 * of one index page at most.
 */
export const COUNT_SHARDS = 64

/**
 * The shard every count change of `trx` adds to: a random one, chosen at the transaction's first
 * change and kept for the rest of it. One count row per transaction is what keeps the count out of
 * deadlocks: a transaction that took a random shard per write (a batch of upserts, 20 rows) held
 * several while waiting for another's, and two such transactions met in opposite orders (40P01 in
 * 19 of 40 batches of 4 concurrent clients on PostgreSQL). With one row each, a transaction waiting
 * on a shard holds no other shard. Pinned by contacts.batch.concurrency.test.ts and contact-count.test.ts.
 */
const shards = new WeakMap<Trx, number>()

export function countShard(trx: Trx): number {
  let shard = shards.get(trx)
  if (shard === undefined) {
    shard = randomInt(COUNT_SHARDS)
    shards.set(trx, shard)
  }
  return shard
}

/**
 * The count as a transaction's last create learned it in its own statement (PostgreSQL,
 * contact-writes.ts), for the quota check that follows in the same transaction: a round trip fewer
 * per create. Any other change of the count in the transaction forgets it (countChanged).
 */
const countsSeen = new WeakMap<Trx, Map<string, number>>()

/** Records that `trx` changed the account's count: to `count` when the write learned it, else unknown. */
export function countChanged(trx: Trx, accountId: string, count?: number): void {
  let seen = countsSeen.get(trx)
  if (count === undefined) {
    seen?.delete(accountId)
    return
  }
  if (!seen) {
    seen = new Map()
    countsSeen.set(trx, seen)
  }
  seen.set(accountId, count)
}

/**
 * Adds `delta` (±) to one of the account's count rows, in the transaction that adds or removes the
 * contacts: a batch's or an import's creates at once (a single write's statements in contact-writes.ts
 * change the count themselves).
 */
export async function addToContactCount(trx: Trx, accountId: string, delta: number): Promise<void> {
  await sql`
    insert into contact_counts (account_id, shard, n) values (${accountId}, ${countShard(trx)}, ${delta})
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n`.execute(trx)
  countChanged(trx, accountId)
}

export async function contactCount(db: Db, accountId: string): Promise<number> {
  const { rows } = await sql<{ n: number | string | null }>`
    select sum(n) as n from contact_counts where account_id = ${accountId}`.execute(db)
  return Number(rows[0]?.n ?? 0)
}

/**
 * After a transaction's creates, before its commit: 403 quota_exceeded (and the rollback of every
 * create in it) when the account now has more than `max` contacts.
 */
export async function enforceContactQuota(trx: Trx, accountId: string, max: number): Promise<void> {
  if ((countsSeen.get(trx)?.get(accountId) ?? (await contactCount(trx, accountId))) > max) {
    throw new AppError(
      'quota_exceeded',
      `This account has reached its limit of ${max} contacts; delete some to create more.`,
    )
  }
}

/** 403 quota_exceeded: a create that would take the account past `max` contacts. */
export const quotaExceeded = (max: number): AppError =>
  new AppError('quota_exceeded', `This account has reached its limit of ${max} contacts; delete some to create more.`)
