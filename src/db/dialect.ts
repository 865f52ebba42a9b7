// The few places where SQLite and PostgreSQL differ. Every other file is dialect-blind.
import { type Kysely, SqliteAdapter } from 'kysely'
import type { Database } from './schema.js'

export type Dialect = 'sqlite' | 'postgres'

/** A unique or primary-key constraint failed (pg and PGlite: SQLSTATE 23505; better-sqlite3: extended code). */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) {
    return false
  }
  const code = (error as { code: unknown }).code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/**
 * The dialect a database or transaction runs on, for the store functions that get only a
 * transaction: read from Kysely's adapter, the object that speaks the dialect.
 * `getExecutor` is marked internal in Kysely's types; src/db/dialect.test.ts pins it.
 */
export function dialectOf(db: Kysely<Database>): Dialect {
  return db.getExecutor().adapter instanceof SqliteAdapter ? 'sqlite' : 'postgres'
}
