// Caller-owned transactions with after-commit effects (in the spirit of the atproto PDS's
// `onCommit`). A route opens the transaction, composes store calls in it (the store functions
// take the transaction as their `db`), and registers what must happen only once the data is
// durable: pushing a key revocation to other instances, waking a delivery worker.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Kysely, Transaction } from 'kysely'
import type { Database } from './schema.js'

/** Anything a store function can run its queries on: the database, or a transaction of it. */
export type Db = Kysely<Database> | Transaction<Database>

/** A transaction in progress: the store functions that write need one. */
export type Trx = Transaction<Database>

/**
 * Registers an effect to run after the commit, never if the transaction rolls back. Effects run
 * in registration order and are awaited before `inTransaction` returns, so a response sent after
 * it has seen them done (a revoked key is already refused on the other instances).
 */
export type OnCommit = (effect: AfterCommit) => void
export type AfterCommit = () => void | Promise<void>

/**
 * Runs `work` in one transaction and then its after-commit effects. An effect cannot undo the
 * commit: it should report its own failure (the revocation push logs and returns). If one throws
 * anyway, the others still run, and the first error is rethrown once they have.
 */
export async function inTransaction<T>(
  db: Kysely<Database>,
  work: (trx: Trx, onCommit: OnCommit) => Promise<T>,
): Promise<T> {
  const effects: AfterCommit[] = []
  const result = await db.transaction().execute((trx) => work(trx, (effect) => effects.push(effect)))
  await runEffects(effects)
  return result
}

async function runEffects(effects: AfterCommit[]): Promise<void> {
  let failure: { error: unknown } | undefined
  for (const effect of effects) {
    try {
      await effect()
    } catch (error) {
      failure ??= { error }
    }
  }
  if (failure) {
    throw failure.error
  }
}

/**
 * PostgreSQL rolled the transaction back to break a lock cycle (40P01 deadlock_detected) or a
 * serialization conflict (40001): nothing of it was written, and the same work run again in a new
 * transaction can succeed (the other side of the cycle has gone on). pg and PGlite carry the SQLSTATE
 * in `code`; SQLite runs one write transaction at a time and never reports either.
 */
export function isTransactionConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) {
    return false
  }
  const code = (error as { code: unknown }).code
  return code === '40P01' || code === '40001'
}

/**
 * A pause before running a conflicted transaction again: 5–25 ms times the attempt, at random, so
 * the transactions that met do not start again in step and meet again.
 */
export const conflictPause = (attempt: number): Promise<void> => sleep(Math.round((5 + Math.random() * 20) * attempt))
