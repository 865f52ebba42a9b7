// Web sessions: a random token goes to the browser, only its digest is stored. Tenant-free, like
// users: a session belongs to a person, who may belong to several accounts.
import { randomBytes } from 'node:crypto'
import type { Db } from '../db/transaction.js'
import { sha256Hex } from '../lib/crypto.js'
import { findUser, type User } from './users.store.js'

export const SESSION_TTL_MS = 14 * 24 * 3600 * 1000
/** last_seen_at is written at most this often per session: not a write on every page. */
export const SESSION_TOUCH_MS = 60 * 1000
const USER_AGENT_MAX = 300

export const sessionDigest = (token: string): string => sha256Hex(token)

/** Stores a new session and returns its token, which is never stored; drops the person's expired ones. */
export async function createSession(db: Db, userId: string, now: Date, userAgent?: string): Promise<string> {
  const token = randomBytes(32).toString('base64url')
  await db.deleteFrom('sessions').where('user_id', '=', userId).where('expires_at', '<=', now.toISOString()).execute()
  await db
    .insertInto('sessions')
    .values({
      token_hash: sessionDigest(token),
      user_id: userId,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + SESSION_TTL_MS).toISOString(),
      last_seen_at: now.toISOString(),
      user_agent: userAgent?.slice(0, USER_AGENT_MAX) ?? null,
    })
    .execute()
  return token
}

/** The person whose unexpired session this token opens; notes when it was last seen, at most once a minute. */
export async function findSessionUser(db: Db, token: string, now: Date, userAgent?: string): Promise<User | undefined> {
  const tokenHash = sessionDigest(token)
  const session = await db
    .selectFrom('sessions')
    .select(['user_id', 'expires_at', 'last_seen_at', 'user_agent'])
    .where('token_hash', '=', tokenHash)
    .executeTakeFirst()
  if (!session || session.expires_at <= now.toISOString()) {
    return undefined
  }
  const stale = session.last_seen_at === null || Date.parse(session.last_seen_at) + SESSION_TOUCH_MS <= now.getTime()
  // Sign-in does not pass the browser along (auth.routes.ts): the first page after it records it.
  if (stale || (session.user_agent === null && userAgent)) {
    await db
      .updateTable('sessions')
      .set({ last_seen_at: now.toISOString(), user_agent: userAgent?.slice(0, USER_AGENT_MAX) ?? null })
      .where('token_hash', '=', tokenHash)
      .execute()
  }
  return findUser(db, session.user_id)
}

export async function deleteSession(db: Db, token: string): Promise<void> {
  await db.deleteFrom('sessions').where('token_hash', '=', sessionDigest(token)).execute()
}

export interface SessionInfo {
  created_at: string
  last_seen_at: string | null
  user_agent: string | null
  expires_at: string
  /** The session of the request that asks. */
  current: boolean
}

/** The person's unexpired sessions, most recently seen first. */
export async function listSessions(db: Db, userId: string, currentToken: string, now: Date): Promise<SessionInfo[]> {
  const current = sessionDigest(currentToken)
  const rows = await db
    .selectFrom('sessions')
    .select(['token_hash', 'created_at', 'last_seen_at', 'user_agent', 'expires_at'])
    .where('user_id', '=', userId)
    .where('expires_at', '>', now.toISOString())
    .execute()
  return rows
    .map(({ token_hash, ...session }) => ({ ...session, current: token_hash === current }))
    .sort((a, b) => (b.last_seen_at ?? b.created_at).localeCompare(a.last_seen_at ?? a.created_at))
}

/** "Sign out everywhere else": ends every session of the person but this one; returns how many. */
export async function deleteOtherSessions(db: Db, userId: string, keepToken: string): Promise<number> {
  const result = await db
    .deleteFrom('sessions')
    .where('user_id', '=', userId)
    .where('token_hash', '<>', sessionDigest(keepToken))
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

export async function purgeExpiredSessions(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom('sessions').where('expires_at', '<=', now.toISOString()).executeTakeFirst()
  return Number(result.numDeletedRows)
}
