// Ours until Node 22: Kysely 0.28 has no PGlite dialect; 0.29 has PGliteDialect but needs Node >= 22 (we run 20).
// A Kysely dialect over PGlite (PostgreSQL compiled to WASM, in-process), so `npm test` covers
// the PostgreSQL dialect with no server. PGlite is one connection: a mutex hands it out.
import type { PGlite } from '@electric-sql/pglite'
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
} from 'kysely'

/** `destroy` runs when Kysely is destroyed: closing the PGlite unless the caller keeps it for reuse. */
export function pgliteDialect(pglite: PGlite, destroy: () => Promise<void> = () => pglite.close()): Dialect {
  let queue: Promise<void> = Promise.resolve()
  let release: (() => void) | undefined

  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      const result = await pglite.query<R>(query.sql, [...query.parameters])
      return {
        rows: result.rows,
        ...(result.affectedRows !== undefined && /^\s*(insert|update|delete|merge)/i.test(query.sql)
          ? { numAffectedRows: BigInt(result.affectedRows) }
          : {}),
      }
    },
    // biome-ignore lint/correctness/useYield: streaming is not used by the app
    async *streamQuery() {
      throw new Error('streamQuery is not supported on PGlite here')
    },
  }

  const driver: Driver = {
    async init() {},
    async acquireConnection() {
      const previous = queue
      let unlock!: () => void
      queue = new Promise((resolve) => {
        unlock = resolve
      })
      await previous
      release = unlock
      return connection
    },
    async beginTransaction(conn) {
      await conn.executeQuery(CompiledQuery.raw('begin'))
    },
    async commitTransaction(conn) {
      await conn.executeQuery(CompiledQuery.raw('commit'))
    },
    async rollbackTransaction(conn) {
      await conn.executeQuery(CompiledQuery.raw('rollback'))
    },
    async releaseConnection() {
      release?.()
    },
    async destroy() {
      await destroy()
    },
  }

  return {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => driver,
    createQueryCompiler: () => new PostgresQueryCompiler(),
    createIntrospector: (db) => new PostgresIntrospector(db),
  }
}
