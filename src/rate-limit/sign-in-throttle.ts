// Sign-in throttling after NIST SP 800-63B §5.2.2: failures per (email, address) pair and per
// address, each past a free allowance doubling the wait. Nothing per email alone, so no one can lock
// an owner out from elsewhere; counted in the database (docs/web-security.md, "Sign-in throttle").
import { randomUUID } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { hmacSha256 } from '../lib/crypto.js'
import { windowStart } from './sliding-window.js'

/** Failures older than this no longer count (and the hourly purge deletes them). */
export const SIGN_IN_WINDOW_MS = 24 * 3600 * 1000

export interface GrowingDelay {
  free: number
  /** The wait after the first failure past the free ones; it doubles with each further failure. */
  firstDelayS: number
  maxDelayS: number
}

/** Per pair, and per address (an office behind one NAT mistypes too); what they allow: docs/web-security.md. */
export const SIGN_IN_POLICIES = {
  pair: { free: 5, firstDelayS: 2, maxDelayS: 900 },
  address: { free: 20, firstDelayS: 2, maxDelayS: 900 },
} as const satisfies Record<string, GrowingDelay>

export function delayAfter(failures: number, policy: GrowingDelay): number {
  if (failures < policy.free) {
    return 0
  }
  // Bounded exponent: 2 ** 1000 is Infinity, and the cap is reached long before.
  return Math.min(policy.maxDelayS, policy.firstDelayS * 2 ** Math.min(failures - policy.free, 30))
}

export type SignInAttempt =
  | { allowed: false; retryAfter: number }
  | {
      allowed: true
      /** The password was right: the pair's failures are forgiven and this attempt is not one. */
      succeeded(): Promise<void>
    }

export interface SignInThrottle {
  /**
   * Asks to check a password for `email` from `address` (client-key.ts). An allowed attempt counts
   * as a failure at once, before the slow check, so a concurrent burst cannot all pass; a right
   * password takes it back (`succeeded`).
   */
  attempt(email: string, address: string, now: Date): Promise<SignInAttempt>
}

/** `secret` keys the digests: the table holds neither the emails typed nor the addresses. */
export function createSignInThrottle(
  db: Kysely<Database>,
  secret: string,
  policies: { pair: GrowingDelay; address: GrowingDelay } = SIGN_IN_POLICIES,
): SignInThrottle {
  const digest = (key: string) => hmacSha256(secret, `sign-in:${key}`).toString('hex')

  async function failuresOf(key: string, now: Date): Promise<{ count: number; last: string | null }> {
    const row = await db
      .selectFrom('sign_in_failures')
      .select((eb) => [eb.fn.countAll().as('count'), eb.fn.max('at').as('last')])
      .where('key', '=', key)
      .where('at', '>', windowStart(now, SIGN_IN_WINDOW_MS))
      .executeTakeFirst()
    return { count: Number(row?.count ?? 0), last: row?.last ?? null }
  }

  async function waitFor(key: string, policy: GrowingDelay, now: Date): Promise<number> {
    const { count, last } = await failuresOf(key, now)
    if (last === null) {
      return 0
    }
    const until = Date.parse(last) + delayAfter(count, policy) * 1000
    return Math.max(0, Math.ceil((until - now.getTime()) / 1000))
  }

  /**
   * After this attempt's failure row is in: did another attempt of the key come within the delay
   * that the failures before this one earned? (A concurrent burst: all but the free ones are.)
   */
  async function crowded(key: string, ownId: string, policy: GrowingDelay, now: Date): Promise<number> {
    const { count } = await failuresOf(key, now)
    const required = delayAfter(count - 1, policy)
    if (required === 0) {
      return 0
    }
    const other = await db
      .selectFrom('sign_in_failures')
      .select('id')
      .where('key', '=', key)
      .where('id', '!=', ownId)
      .where('at', '>', new Date(now.getTime() - required * 1000).toISOString())
      .executeTakeFirst()
    return other ? required : 0
  }

  return {
    async attempt(email, address, now) {
      const keys = [
        { key: digest(`pair:${email}\n${address}`), policy: policies.pair },
        { key: digest(`address:${address}`), policy: policies.address },
      ]
      const waits = await Promise.all(keys.map(({ key, policy }) => waitFor(key, policy, now)))
      const wait = Math.max(...waits)
      if (wait > 0) {
        return { allowed: false, retryAfter: wait }
      }
      const marks = keys.map((k) => ({ ...k, id: randomUUID() }))
      await db
        .insertInto('sign_in_failures')
        .values(marks.map(({ id, key }) => ({ id, key, at: now.toISOString() })))
        .execute()
      const crowdedWaits = await Promise.all(marks.map(({ key, id, policy }) => crowded(key, id, policy, now)))
      const unmark = () =>
        db
          .deleteFrom('sign_in_failures')
          .where(
            'id',
            'in',
            marks.map((m) => m.id),
          )
          .execute()
      if (Math.max(...crowdedWaits) > 0) {
        await unmark()
        return { allowed: false, retryAfter: Math.max(...crowdedWaits) }
      }
      const [pair] = marks
      return {
        allowed: true,
        async succeeded() {
          await unmark()
          // The pair's earlier failures were the owner's typos: forgiven. The address's stay.
          if (pair) {
            await db.deleteFrom('sign_in_failures').where('key', '=', pair.key).execute()
          }
        },
      }
    },
  }
}

export async function purgeSignInFailures(db: Kysely<Database>, now: Date, windowMs: number): Promise<number> {
  const result = await db
    .deleteFrom('sign_in_failures')
    .where('at', '<=', windowStart(now, windowMs))
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}
