// Web sessions: a random token goes to the browser, only its digest is stored. Tenant-free, like
// users: a session belongs to a person, who may belong to several accounts.
import { randomBytes } from 'node:crypto'
import type { Db } from '../db/transaction.js'
import { sha256Hex } from '../lib/crypto.js'
import { findUser, type User } from './users.store.js'

export const SESSION_TTL_MS = 14 * 24 * 3600 * 1000

/** Stores a new session of the person; returns its token, which is never stored. */
export async function createSession(db: Db, userId: string, now: Date): Promise<string> {
  const token = randomBytes(32).toString('base64url')
  await db
    .insertInto('sessions')
    .values({
      token_hash: sha256Hex(token),
      user_id: userId,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + SESSION_TTL_MS).toISOString(),
    })
    .execute()
  return token
}

/** The person whose unexpired session this token opens, or undefined. */
export async function findSessionUser(db: Db, token: string, now: Date): Promise<User | undefined> {
  const session = await db
    .selectFrom('sessions')
    .select(['user_id', 'expires_at'])
    .where('token_hash', '=', sha256Hex(token))
    .executeTakeFirst()
  if (!session || session.expires_at <= now.toISOString()) {
    return undefined
  }
  return findUser(db, session.user_id)
}

export async function deleteSession(db: Db, token: string): Promise<void> {
  await db.deleteFrom('sessions').where('token_hash', '=', sha256Hex(token)).execute()
}
