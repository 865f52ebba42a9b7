// Caller-owned transactions with after-commit effects (as in the atproto PDS's `onCommit`), and
// the retry of a transaction that lost a race: a deadlock, a serialization failure, or (for the
// writes that ask) a unique violation that a fresh attempt resolves.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Kysely, Transaction } from 'kysely'
import { AppError } from '../http/errors.js'
import { isUniqueViolation } from './dialect.js'
import type { Database } from './schema.js'

/** Anything a store function can run its queries on: the database, or a transaction of it. */
export type Db = Kysely<Database> | Transaction<Database>

/** A transaction in progress: the store functions that write need one. */
export type Trx = Transaction<Database>

/**
 * Registers an effect to run after the commit, never if the transaction rolls back. Effects run in
 * registration order and are awaited before `inTransaction` returns, so a response sent after it
 * has seen them done (a revoked key is already refused on the other instances).
 */
export type OnCommit = (effect: AfterCommit) => void
export type AfterCommit = () => void | Promise<void>

/**
 * Runs `work` in one transaction and then its after-commit effects. An effect cannot undo the
 * commit: it reports its own failure. If one throws anyway, the others still run, and the first
 * error is rethrown once they have.
 */
export async function inTransaction<T>(
  db: Kysely<Database>,
  work: (trx: Trx, onCommit: OnCommit) => Promise<T>,
): Promise<T> {
  const effects: AfterCommit[] = []
  const result = await db.transaction().execute((trx) => work(trx, (effect) => effects.push(effect)))
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
  return result
}

/**
 * PostgreSQL rolled the transaction back to break a lock cycle (40P01) or a serialization conflict
 * (40001): nothing of it was written, and the same work in a new transaction can succeed. pg and
 * PGlite carry the SQLSTATE in `code`; SQLite runs one write transaction at a time and reports neither.
 */
export function isTransactionConflict(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined
  return code === '40P01' || code === '40001'
}

export interface RetryOptions {
  /**
   * Run again after a unique violation too: for writes that look a row up before inserting it
   * (an upsert by email), where the next attempt finds what a concurrent request just inserted.
   */
  uniqueViolations?: boolean
  /** The 503's detail once the attempts are spent. */
  busy?: string
  /** Told the attempt number (1, 2, …) before each run. */
  onAttempt?: (attempt: number) => void
}

const CONFLICT_ATTEMPTS = 5
const UNIQUE_ATTEMPTS = 3

/**
 * `inTransaction`, run again in a new transaction when it lost a race, after a short random pause
 * so that the transactions that met do not meet again in step. When the attempts are spent: 503
 * with Retry-After, never a 500. `work` must be safe to run again: its writes roll back and its
 * after-commit effects are dropped with them.
 */
export async function inRetriedTransaction<T>(
  db: Kysely<Database>,
  work: (trx: Trx, onCommit: OnCommit) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    options.onAttempt?.(attempt)
    try {
      return await inTransaction(db, work)
    } catch (error) {
      const conflict = isTransactionConflict(error)
      if (!conflict && !(options.uniqueViolations && isUniqueViolation(error))) {
        throw error
      }
      if (attempt >= (conflict ? CONFLICT_ATTEMPTS : UNIQUE_ATTEMPTS)) {
        throw new AppError('service_unavailable', options.busy ?? 'The data is being changed by other requests.', {
          headers: { 'retry-after': '1' },
        })
      }
      if (conflict) {
        await sleep(Math.round((5 + Math.random() * 20) * attempt))
      }
    }
  }
}
