// Sign-in throttling: failures counted per key (an email's digest, a client address) in a sliding
// window, in the database, so every instance behind a load balancer counts the same failures.
import { randomUUID } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { sha256Hex } from '../lib/crypto.js'
import { retryAfter, windowStart } from './sliding-window.js'

/** The window in which sign-in failures count. */
export const SIGN_IN_WINDOW_MS = 15 * 60 * 1000

export interface Throttle {
  /** Seconds to wait when the key has used up its failures, else 0. */
  retryAfter(key: string, now: Date): Promise<number>
  fail(key: string, now: Date): Promise<void>
  reset(key: string): Promise<void>
}

/**
 * A throttle of `maxFailures` per window for keys of one kind (`email`, `ip`: kinds never share a
 * count). Keys are stored as digests: the table never holds the emails people typed.
 */
export function createThrottle(db: Kysely<Database>, kind: string, maxFailures: number, windowMs: number): Throttle {
  const window = { max: maxFailures, windowMs }
  const digest = (key: string) => sha256Hex(`${kind}:${key}`)
  return {
    async retryAfter(key, now) {
      return retryAfter(db.selectFrom('sign_in_failures').where('key', '=', digest(key)), window, now)
    },
    async fail(key, now) {
      const hashed = digest(key)
      await db.transaction().execute(async (trx) => {
        // Failures older than the window no longer count: the key's rows stay few.
        await trx
          .deleteFrom('sign_in_failures')
          .where('key', '=', hashed)
          .where('at', '<=', windowStart(now, windowMs))
          .execute()
        await trx
          .insertInto('sign_in_failures')
          .values({ id: randomUUID(), key: hashed, at: now.toISOString() })
          .execute()
      })
    },
    async reset(key) {
      await db.deleteFrom('sign_in_failures').where('key', '=', digest(key)).execute()
    },
  }
}

/** Deletes failures older than the window of every key (keys never tried again); returns how many. */
export async function purgeSignInFailures(db: Kysely<Database>, now: Date, windowMs: number): Promise<number> {
  const result = await db
    .deleteFrom('sign_in_failures')
    .where('at', '<=', windowStart(now, windowMs))
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}
