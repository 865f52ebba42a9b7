// How many contacts an account has, for its quota, without a hot row: the count is spread over
// COUNT_SHARDS rows per account and a read sums them. The writes (contact-writes.ts) add a
// transaction's changes to one shard, chosen when the transaction starts (contact-service.ts), so
// concurrent writers rarely meet on a row and a transaction waiting on a shard holds no other one.
// Why, and how far concurrent creates can overshoot: docs/api-decisions.md, "Contact quota".
import { randomInt } from 'node:crypto'
import type { Tenant } from '../accounts/tenant.js'
import { dialectOf } from '../db/dialect.js'
import { bind, sqlFor } from '../db/statement.js'
import type { Db } from '../db/transaction.js'
import { AppError } from '../http/errors.js'

export const COUNT_SHARDS = 64

/** The shard a new write transaction adds its count changes to. */
export const pickCountShard = (): number => randomInt(COUNT_SHARDS)

export async function contactCount(db: Db, accountId: string): Promise<number> {
  const { rows } = await db.executeQuery<{ n: number | string | null }>(
    bind(COUNT[dialectOf(db)], { account: accountId }),
  )
  return Number(rows[0]?.n ?? 0)
}

const COUNT = {
  postgres: sqlFor('postgres')`select sum(n) as n from contact_counts where account_id = ${'account'}`,
  sqlite: sqlFor('sqlite')`select sum(n) as n from contact_counts where account_id = ${'account'}`,
}

/** 403 quota_exceeded: a create that would take the tenant past `max` contacts; it names the mode's quota. */
export const quotaExceeded = (tenant: Tenant, max: number): AppError =>
  new AppError(
    'quota_exceeded',
    tenant.livemode
      ? `This account has reached its limit of ${max} contacts; delete some to create more.`
      : `This account's test mode has reached its limit of ${max} test contacts; delete some, or all test data, to create more.`,
  )
