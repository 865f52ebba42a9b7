// Opens the configured database as a Kysely instance: SQLite (embedded default) or PostgreSQL.
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, type SqliteDatabase, SqliteDialect, sql } from 'kysely'
import pg from 'pg'
import type { DatabaseConfig, SqliteConfig } from '../config.js'
import { traceStatements } from '../observability/tracing.js'
import type { Dialect } from './dialect.js'
import type { Database } from './schema.js'

export interface DatabaseHandle {
  readonly db: Kysely<Database>
  readonly dialect: Dialect
  /** Cheap round trip for /readyz. */
  ping(): Promise<void>
  /**
   * The SQLite file, when the database is one (not `:memory:`): a worker thread can open a
   * connection of its own to it (the CSV import's writes, src/imports/import-job.ts).
   */
  readonly sqliteFile?: SqliteConfig
  /** PostgreSQL pool state, for metrics. */
  poolStats?: () => { total: number; idle: number; waiting: number }
  close(): Promise<void>
}

export function openDatabase(config: DatabaseConfig): DatabaseHandle {
  return config.kind === 'sqlite' ? openSqlite(config) : openPostgres(config.url, config.pooler === 'transaction')
}

/**
 * A database file created before files were made 0600 (or by hand) keeps its mode, and SQLite
 * gives the WAL and shared-memory files the database's: an existing file readable by others, and
 * its -wal and -shm, are narrowed to the service's user at start.
 */
function narrowToOwner(file: string): void {
  for (const name of [file, `${file}-wal`, `${file}-shm`]) {
    const stat = statSync(name, { throwIfNoEntry: false })
    if (stat !== undefined && (stat.mode & 0o077) !== 0) {
      chmodSync(name, 0o600)
    }
  }
}

function openSqlite(config: SqliteConfig): DatabaseHandle {
  const { path: file, synchronous } = config
  if (file !== ':memory:') {
    mkdirSync(path.dirname(file), { recursive: true })
    // Readable by the service's user only (as the secret beside it): created here with mode 0600
    // before SQLite opens it, and SQLite gives its -wal and -shm files the database file's mode.
    closeSync(openSync(file, 'a', 0o600))
    narrowToOwner(file)
  }
  const database = new SQLite(file)
  // WAL lets readers run beside the writer; NORMAL survives a crash of the process, FULL also a
  // power loss (docs/api-decisions.md, "Durability"). The CLI and a server share the file: wait for
  // the other's write instead of failing, and first, so that the switch to WAL waits too.
  database.pragma('busy_timeout = 5000')
  switchToWal(database)
  database.pragma(`synchronous = ${synchronous}`)
  database.pragma('foreign_keys = ON')
  // Smaller than better-sqlite3's default: it holds the indexes' upper levels, the OS's page cache
  // the rest, and the process stays within its memory target (docs/performance.md, "RSS").
  database.pragma(`cache_size = -${SQLITE_CACHE_KIB}`)
  const handle = wrap(
    // With tracing on (src/observability/tracing.ts), a span per statement.
    new Kysely<Database>({ dialect: traceStatements(new SqliteDialect({ database: withStatementCache(database) })) }),
    'sqlite',
  )
  return file === ':memory:' ? handle : { ...handle, sqliteFile: config }
}

/**
 * `journal_mode = WAL`, retried on SQLITE_BUSY for up to WAL_SWITCH_WAIT_MS. Switching a new file
 * needs its exclusive lock, and when two connections that both hold the shared lock ask for it
 * (two processes opening the file at once), SQLite answers SQLITE_BUSY at once rather than call
 * the busy handler, which could deadlock: busy_timeout does not cover it. Start-up only, so the
 * wait between tries may block (test/sqlite-open-race.test.ts: 6 processes × 8 new files).
 */
function switchToWal(database: SQLite.Database): void {
  const deadline = Date.now() + WAL_SWITCH_WAIT_MS
  for (;;) {
    try {
      database.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) {
        throw error
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5 + Math.random() * 20)
    }
  }
}
const WAL_SWITCH_WAIT_MS = 5000

/** SQLite's page cache, in KiB (a negative cache_size is KiB, a positive one pages). */
const SQLITE_CACHE_KIB = 4096

/** Enough for every distinct statement the app issues; a list's filter combinations are a few dozen. */
const STATEMENT_CACHE_MAX = 1000

/**
 * Kysely prepares every query anew, and compiling SQL costs SQLite more than running a keyset
 * page. Here each distinct SQL text is prepared once and reused, least recently used evicted
 * first. A statement still being iterated (a streamed query) cannot be re-entered: then a fresh
 * one is prepared for that call.
 */
function withStatementCache(database: SQLite.Database, max = STATEMENT_CACHE_MAX): SqliteDatabase {
  const cache = new Map<string, SQLite.Statement>()
  return {
    close: () => database.close(),
    prepare(sqlText) {
      // A deferred BEGIN takes the write lock at the first write, and another connection's commit
      // between this one's first read and first write (the import worker's, import-job.ts) fails
      // it with SQLITE_BUSY at once, busy_timeout or not. IMMEDIATE waits for the lock first.
      const text = sqlText === 'begin' ? 'begin immediate' : sqlText
      const cached = cache.get(text)
      if (cached && !cached.busy) {
        // Re-inserted, so the Map's insertion order stays least recently used first.
        cache.delete(text)
        cache.set(text, cached)
        return cached
      }
      const statement = database.prepare(text)
      if (!cached) {
        if (cache.size >= max) {
          const oldest = cache.keys().next().value
          if (oldest !== undefined) {
            cache.delete(oldest)
          }
        }
        cache.set(text, statement)
      }
      return statement
    },
  }
}

// int8 (count(*), sums) arrives as a string by default; our numbers fit in a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

function openPostgres(url: string, behindPooler: boolean): DatabaseHandle {
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5000 })
  // A client that loses its connection emits 'error', which with no listener ends the process; the
  // pool listens only while a client is idle. The error also fails the statement on it, which the
  // request answers as a problem, and the pool drops the client (test/connection-loss.test.ts).
  pool.on('error', () => {})
  pool.on('connect', (client) => client.on('error', () => {}))
  // A transaction pooler gives each transaction whichever server connection is free: a statement
  // prepared on one is unknown on the next (or already exists there, under another client's name).
  if (!behindPooler) {
    pool.on('connect', withNamedStatements)
  }
  return {
    ...wrap(new Kysely<Database>({ dialect: traceStatements(new PostgresDialect({ pool })) }), 'postgres'),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  }
}

/**
 * Appended to a statement whose best plan depends on its values (a time range): PostgreSQL then
 * plans it on every call instead of settling on a generic plan, which a prepared statement would.
 */
export const PLAN_PER_CALL = '/* plan per call */'

/** Statements one connection keeps prepared, at most; any further ones run unnamed. */
const NAMED_STATEMENTS_MAX = 200
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i

/**
 * PostgreSQL parses and plans an unnamed statement on every call. Here each connection prepares a
 * data statement under a name the first time it runs it, then only binds and executes it. Those
 * with `*` stay unnamed (after another instance's migration adds a column, a prepared `select *`
 * fails with "cached plan must not change result type"), and so do those marked PLAN_PER_CALL.
 */
function withNamedStatements(client: pg.PoolClient): void {
  const names = new Map<string, string>()
  const query = client.query.bind(client) as (...args: unknown[]) => unknown
  const named = (text: unknown, values?: unknown, callback?: unknown): unknown => {
    if (typeof text === 'string' && Array.isArray(values) && callback === undefined) {
      let name = names.get(text)
      if (
        name === undefined &&
        names.size < NAMED_STATEMENTS_MAX &&
        PREPARABLE.test(text) &&
        !text.includes('*') &&
        !text.endsWith(PLAN_PER_CALL)
      ) {
        name = `contacts_api_${names.size}`
        names.set(text, name)
      }
      if (name !== undefined) {
        return (query({ name, text, values }) as Promise<unknown>).catch((error: unknown) => {
          throw withPoolerHint(error)
        })
      }
    }
    return query(text, values, callback)
  }
  client.query = named as typeof client.query
}

/** What to do when a named statement meets a transaction pooler; in the message of the error it explains. */
export const POOLER_HINT =
  'DATABASE_URL looks like a transaction-mode connection pooler (PgBouncer pool_mode=transaction, a hosted pooler): set DATABASE_POOLER=transaction (README, "Behind a connection pooler")'

/**
 * A named statement refused as 42P05 (another client's statement of that name is there) or 26000
 * (the one this connection prepared is not) means the server connection changed under the client:
 * a transaction pooler without DATABASE_POOLER=transaction. The error's message gets the fix, so
 * every place that prints or logs it names the setting; its `code` is kept.
 */
export function withPoolerHint(error: unknown): unknown {
  if (
    error instanceof Error &&
    'code' in error &&
    (error.code === '42P05' || error.code === '26000') &&
    error.message.includes('"contacts_api_') &&
    !error.message.includes(POOLER_HINT)
  ) {
    error.message = `${error.message}: ${POOLER_HINT}`
  }
  return error
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
