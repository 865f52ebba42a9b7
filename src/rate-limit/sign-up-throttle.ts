// Sign-ups per client address (IPv6: per /64) in a sliding hour, counted as rows of the sign-in
// throttle's table (sign_in_failures: timestamped events under a keyed digest, purged hourly), so
// every instance counts alike with or without Redis.
import { randomUUID } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { hmacSha256 } from '../lib/crypto.js'
import { retryAfter } from './sliding-window.js'

export const SIGN_UP_WINDOW_MS = 3600 * 1000

export interface SignUpThrottle {
  /**
   * Takes one sign-up of the address's hourly budget: 0 when taken, else the seconds until one is
   * free. The row goes in first and is counted after, so a concurrent burst gets at most the budget.
   */
  take(address: string, now: Date): Promise<number>
}

/** `perHour` sign-ups per address; 0 turns the limit off. */
export function createSignUpThrottle(db: Kysely<Database>, secret: string, perHour: number): SignUpThrottle {
  const window = { max: perHour, windowMs: SIGN_UP_WINDOW_MS }
  return {
    async take(address, now) {
      if (perHour <= 0) {
        return 0
      }
      const key = hmacSha256(secret, `sign-up:${address}`).toString('hex')
      const events = () => db.selectFrom('sign_in_failures').where('key', '=', key)
      const id = randomUUID()
      await db.insertInto('sign_in_failures').values({ id, key, at: now.toISOString() }).execute()
      const newest = await events()
        .select('id')
        .where('at', '>', new Date(now.getTime() - SIGN_UP_WINDOW_MS).toISOString())
        .orderBy('at', 'desc')
        .orderBy('id')
        .limit(perHour + 1)
        .execute()
      if (newest.length <= perHour) {
        return 0
      }
      // Over the budget: this one does not count (a refused attempt does not extend the wait). In a
      // burst the others may have left too, so the wait is at least 1 s: refused means refused.
      await db.deleteFrom('sign_in_failures').where('id', '=', id).execute()
      return Math.max(1, await retryAfter(events(), window, now))
    },
  }
}
