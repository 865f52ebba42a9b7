// Opens the configured database as a Kysely instance: SQLite (embedded default) or PostgreSQL.
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely'
import pg from 'pg'
import type { DatabaseConfig } from '../config.js'
import type { Dialect } from './dialect.js'
import type { Database } from './schema.js'

export interface DatabaseHandle {
  readonly db: Kysely<Database>
  readonly dialect: Dialect
  /** Cheap round trip for /readyz. */
  ping(): Promise<void>
  /** PostgreSQL pool state, for metrics. */
  poolStats?: () => { total: number; idle: number; waiting: number }
  close(): Promise<void>
}

export function openDatabase(config: DatabaseConfig): DatabaseHandle {
  return config.kind === 'sqlite' ? openSqlite(config.path, config.synchronous) : openPostgres(config.url)
}

function openSqlite(file: string, synchronous: 'NORMAL' | 'FULL'): DatabaseHandle {
  if (file !== ':memory:') {
    mkdirSync(path.dirname(file), { recursive: true })
  }
  const database = new SQLite(file)
  // WAL lets readers run beside the writer. NORMAL survives process crashes (kill -9);
  // FULL also survives power loss, at about half the write rate.
  database.pragma('journal_mode = WAL')
  database.pragma(`synchronous = ${synchronous}`)
  database.pragma('foreign_keys = ON')
  // The CLI and a running server share the file: wait for the other's write instead of failing.
  database.pragma('busy_timeout = 5000')
  return wrap(new Kysely<Database>({ dialect: new SqliteDialect({ database }) }), 'sqlite')
}

// int8 (count(*), sums) arrives as a string by default; our numbers fit in a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

function openPostgres(url: string): DatabaseHandle {
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5000 })
  // An idle client that loses its connection emits 'error'; without a listener it would crash the process.
  pool.on('error', () => {})
  return {
    ...wrap(new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), 'postgres'),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  }
}

/** Builds the handle around any Kysely instance (tests use it for PGlite). */
export function wrap(db: Kysely<Database>, dialect: Dialect): DatabaseHandle {
  return {
    db,
    dialect,
    ping: async () => {
      await sql`select 1`.execute(db)
    },
    close: () => db.destroy(),
  }
}
