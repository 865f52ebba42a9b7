// Accounts (tenants).
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { newId } from '../lib/ids.js'
import type { AccountsTable } from './accounts.table.js'
import { testTenant } from './tenant.js'

export type Account = Omit<AccountsTable, 'purge_requested_at'>

/** The longest account name, in characters, wherever an account is named (sign-up, new account, CLI). */
export const ACCOUNT_NAME_MAX = 256

/** A new account, with its test environment: a tenant of its own that shares its name (tenant.ts). */
export async function insertAccount(db: Kysely<Database>, name: string, now: Date): Promise<Account> {
  const account: Account = { id: newId('account'), name, created_at: now.toISOString(), updated_at: now.toISOString() }
  await db
    .insertInto('accounts')
    .values([account, { ...account, id: testTenant(account.id).id }])
    .execute()
  return account
}

/** Whether any account exists yet (a fresh install has none, and `serve` says how to make one). */
export async function hasAnyAccount(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('accounts').select('id').limit(1).executeTakeFirst()) !== undefined
}

export async function findAccount(db: Kysely<Database>, accountId: string): Promise<Account | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirst()
}
