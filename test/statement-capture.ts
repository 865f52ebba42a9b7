// Counts the statements the app sends to PostgreSQL, at the drivers' query methods (node-postgres for
// the server, PGlite in process), as test/citus-statements.test.ts captures them: each one is a round
// trip to the server on a connection that does not pipeline. Install it before the pool opens its
// connections: src/db/database.ts binds each new connection's `query` when it connects.
import { PGlite } from '@electric-sql/pglite'
import pg from 'pg'

export interface StatementCapture {
  /** Statement texts in the order sent, since the capture began or since the last `take`. */
  take(): string[]
  restore(): void
}

export function captureStatements(): StatementCapture {
  let statements: string[] = []
  type Query = (this: unknown, ...args: unknown[]) => unknown
  const pgProto = pg.Client.prototype as unknown as { query: Query }
  const pgliteProto = PGlite.prototype as unknown as { query: Query }
  const pgQuery = pgProto.query
  const pgliteQuery = pgliteProto.query
  const record = (first: unknown) => {
    const text = typeof first === 'string' ? first : (first as { text?: unknown } | null)?.text
    if (typeof text === 'string') {
      statements.push(text)
    }
  }
  pgProto.query = function (this: unknown, ...args: unknown[]) {
    record(args[0])
    return pgQuery.apply(this, args)
  }
  pgliteProto.query = function (this: unknown, ...args: unknown[]) {
    record(args[0])
    return pgliteQuery.apply(this, args)
  }
  return {
    take() {
      const taken = statements
      statements = []
      return taken
    },
    restore() {
      pgProto.query = pgQuery
      pgliteProto.query = pgliteQuery
    },
  }
}
