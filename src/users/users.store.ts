// People and their memberships in accounts. Membership is the check behind every web page.
import type { Kysely } from 'kysely'
import { type Account, insertAccount } from '../accounts/accounts.store.js'
import type { Database } from '../db/schema.js'
import { type Db, inTransaction, type OnCommit, type Trx } from '../db/transaction.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import type { Role, UsersTable } from './users.table.js'

export type User = Omit<UsersTable, 'password_hash' | 'email_lower'>

export interface AccountMembership {
  account: Account
  role: Role
}

/** Sign-up: a person, their first account, and ownership of it, together or not at all. */
export async function createUserWithAccount(
  db: Kysely<Database>,
  input: { email: string; passwordHash: string; accountName: string; now: Date },
): Promise<{ user: User; account: Account }> {
  return inTransaction(db, async (trx) => {
    const user: UsersTable = {
      id: newId('user'),
      email: input.email,
      email_lower: emailKey(input.email),
      password_hash: input.passwordHash,
      created_at: input.now.toISOString(),
    }
    await trx.insertInto('users').values(user).execute()
    const account = await insertAccount(trx, input.accountName, input.now)
    await addMembership(trx, account.id, user.id, 'owner', input.now)
    return { user: { id: user.id, email: user.email, created_at: user.created_at }, account }
  })
}

/** A further account of a person, who owns it. */
export async function createAccountForUser(
  db: Kysely<Database>,
  userId: string,
  name: string,
  now: Date,
): Promise<Account> {
  return inTransaction(db, async (trx) => {
    const account = await insertAccount(trx, name, now)
    await addMembership(trx, account.id, userId, 'owner', now)
    return account
  })
}

export async function addMembership(db: Db, accountId: string, userId: string, role: Role, now: Date) {
  await db
    .insertInto('memberships')
    .values({ account_id: accountId, user_id: userId, role, created_at: now.toISOString() })
    .execute()
}

/** For sign-in: the user and the stored hash. */
export async function findUserByEmail(db: Db, email: string) {
  return db.selectFrom('users').selectAll().where('email_lower', '=', emailKey(email)).executeTakeFirst()
}

export async function findUser(db: Db, userId: string): Promise<User | undefined> {
  return db.selectFrom('users').select(['id', 'email', 'created_at']).where('id', '=', userId).executeTakeFirst()
}

/** The emails of these people, by user id. */
export async function userEmails(db: Db, userIds: readonly string[]): Promise<Map<string, string>> {
  if (userIds.length === 0) {
    return new Map()
  }
  const rows = await db
    .selectFrom('users')
    .select(['id', 'email'])
    .where('id', 'in', [...new Set(userIds)])
    .execute()
  return new Map(rows.map((row) => [row.id, row.email]))
}

/**
 * Locks the account's row until the transaction ends, on PostgreSQL (SQLite serializes writers
 * anyway, and this write takes its lock): membership changes, and changes made for a member, take
 * it, so each sees the other's result.
 */
async function lockAccount(trx: Trx, accountId: string): Promise<void> {
  await trx
    .updateTable('accounts')
    .set((eb) => ({ name: eb.ref('name') }))
    .where('id', '=', accountId)
    .execute()
}

/**
 * Whether the person is still a member, read with the account's row locked: a key issued for
 * them cannot slip past a removal committing at the same moment.
 */
export async function isMemberNow(trx: Trx, accountId: string, userId: string): Promise<boolean> {
  await lockAccount(trx, accountId)
  return (await roleIn(trx, accountId, userId)) !== undefined
}

/** The person's role in the account, or undefined when they are not a member. */
async function roleIn(db: Db, accountId: string, userId: string): Promise<Role | undefined> {
  const row = await db
    .selectFrom('memberships')
    .select('role')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .executeTakeFirst()
  return row?.role
}

/** The accounts a person belongs to, oldest first. */
export async function listMemberships(db: Db, userId: string): Promise<AccountMembership[]> {
  const rows = await db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select(['accounts.id', 'accounts.name', 'accounts.created_at', 'accounts.updated_at', 'memberships.role'])
    .where('memberships.user_id', '=', userId)
    .orderBy('accounts.id')
    .execute()
  return rows.map(({ role, ...account }) => ({ account, role }))
}

export interface Member {
  id: string
  email: string
  role: Role
  /** When the person joined the account. */
  created_at: string
}

/** The people of an account, in the order they joined. */
export async function listMembers(db: Db, accountId: string): Promise<Member[]> {
  return db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['users.id', 'users.email', 'memberships.role', 'memberships.created_at'])
    .where('memberships.account_id', '=', accountId)
    .orderBy('memberships.created_at')
    .execute()
}

export type MemberChange =
  | { ok: true }
  /** The person is not a member of this account. */
  | { ok: false; code: 'not_found' }
  /** The change would leave the account without an owner. */
  | { ok: false; code: 'last_owner' }

/**
 * Gives a member another role, or removes them (`role` null); refused when it would leave no owner.
 * Removal takes effect on their next request: every page reads the memberships afresh.
 */
export async function changeMembership(
  db: Kysely<Database>,
  accountId: string,
  userId: string,
  role: Role | null,
  /** More work in the same transaction once the change is made (a removal's key revocations). */
  alsoIn?: (trx: Trx, onCommit: OnCommit) => Promise<void>,
): Promise<MemberChange> {
  return inTransaction(db, async (trx, onCommit): Promise<MemberChange> => {
    // So that two owners demoting each other at once cannot both see the other still an owner.
    await lockAccount(trx, accountId)
    const owners = await trx
      .selectFrom('memberships')
      .select('user_id')
      .where('account_id', '=', accountId)
      .where('role', '=', 'owner')
      .execute()
    const current = await roleIn(trx, accountId, userId)
    if (!current) {
      return { ok: false, code: 'not_found' }
    }
    if (current === 'owner' && role !== 'owner' && owners.length <= 1) {
      return { ok: false, code: 'last_owner' }
    }
    if (role === null) {
      await trx.deleteFrom('memberships').where('account_id', '=', accountId).where('user_id', '=', userId).execute()
    } else {
      await trx
        .updateTable('memberships')
        .set({ role })
        .where('account_id', '=', accountId)
        .where('user_id', '=', userId)
        .execute()
    }
    await alsoIn?.(trx, onCommit)
    return { ok: true }
  })
}
