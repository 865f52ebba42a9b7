// The few places where SQLite and PostgreSQL differ. Every other file is dialect-blind.
export type Dialect = 'sqlite' | 'postgres'

/** A unique or primary-key constraint failed (pg and PGlite: SQLSTATE 23505; better-sqlite3: extended code). */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) {
    return false
  }
  const code = (error as { code: unknown }).code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}
