// Runs the migrations in db/migrations through Kysely's Migrator, handing each the dialect.
import {
  type DatabaseIntrospector,
  type DialectAdapter,
  type Kysely,
  type Migration,
  type MigrationResultSet,
  Migrator,
  sql,
} from 'kysely'
import type { DatabaseHandle } from './database.js'
import type { Dialect } from './dialect.js'
import type { MigrationDb } from './migration-helpers.js'
import * as migrations from './migrations/index.js'
import type { Database } from './schema.js'

interface MigrationModule {
  up(db: MigrationDb, dialect: Dialect): Promise<void>
  down?(db: MigrationDb, dialect: Dialect): Promise<void>
}

function provider(handle: DatabaseHandle) {
  return {
    getMigrations: async (): Promise<Record<string, Migration>> =>
      Object.fromEntries(
        Object.entries(migrations as Record<string, MigrationModule>).map(([exportName, module]) => {
          const name = exportName.replace(/^m/, '')
          const { down } = module
          return [
            name,
            {
              up: (db) => module.up(db, handle.dialect),
              ...(down ? { down: (db) => down(db, handle.dialect) } : {}),
            } satisfies Migration,
          ]
        }),
      ),
  }
}

/** Kysely's own lock id: a migrator of an earlier release (session lock) and this one exclude each other. */
const MIGRATION_LOCK_ID = 3853314791062309107n

/**
 * Runs `use` with a Migrator; with `locked`, on PostgreSQL, inside one transaction that holds the
 * migration lock. Kysely's own session-level advisory lock stays held on a pooled connection behind
 * a transaction-mode pooler (the lock, the transaction and the unlock each get whichever server
 * connection is free); `pg_advisory_xact_lock`, taken in the migrations' own transaction, ends with
 * it (test/migrations.test.ts, "releases the migration lock").
 */
async function withMigrator<T>(
  handle: DatabaseHandle,
  locked: boolean,
  use: (migrator: Migrator) => Promise<T>,
): Promise<T> {
  if (handle.dialect === 'sqlite' && locked) {
    return withSqliteWriteLock(handle, use)
  }
  if (handle.dialect !== 'postgres') {
    return use(new Migrator({ db: handle.db, provider: provider(handle) }))
  }
  if (!locked) {
    const schema = await currentSchema(handle.db)
    return use(
      new Migrator({
        db: introspectingOnly(handle.db, schema),
        provider: provider(handle),
        migrationTableSchema: schema,
      }),
    )
  }
  return handle.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(trx)
    const schema = await currentSchema(trx)
    const db = asMigratorConnection<Database>(introspectingOnly<Database>(trx, schema), trx)
    return use(
      new Migrator({
        db,
        provider: provider(handle),
        migrationTableSchema: schema,
        // The transaction is ours (above): Kysely must neither open another nor take its lock.
        disableTransactions: true,
      }),
    )
  })
}

/**
 * SQLite: the whole migration, Kysely's own tables included, inside one `BEGIN IMMEDIATE`, which
 * takes the write lock before anything is read. Kysely's SQLite migrator has no lock, so processes
 * started together on a new file each read "nothing applied" and created the same tables
 * (test/sqlite-migrate-race.test.ts); now the others wait on busy_timeout and find it migrated.
 */
async function withSqliteWriteLock<T>(handle: DatabaseHandle, use: (migrator: Migrator) => Promise<T>): Promise<T> {
  return handle.db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection)
    try {
      const result = await use(
        new Migrator({
          db: asMigratorConnection(connection, connection),
          provider: provider(handle),
          // The transaction is ours (above).
          disableTransactions: true,
        }),
      )
      await sql`commit`.execute(connection)
      return result
    } catch (error) {
      await sql`rollback`.execute(connection)
      throw error
    }
  })
}

// Kysely looks for its own tables in every schema; pin them to ours, or a database where
// another schema (another service, a test run) has them would make us skip creating them.
async function currentSchema(db: Kysely<Database>): Promise<string> {
  const name = (await sql<{ name: string }>`select current_schema() as name`.execute(db)).rows[0]?.name
  if (name === undefined) {
    throw new Error('PostgreSQL reported no current schema (is search_path empty?)')
  }
  return name
}

/**
 * The transaction as the Migrator sees it (with `disableTransactions`): its `connection()` is the
 * transaction itself, and its adapter's lock is a no-op, because the transaction holds the lock.
 */
function asMigratorConnection<DB>(db: Kysely<DB>, trx: Kysely<DB>): Kysely<DB> {
  const executor = trx.getExecutor()
  const adapter = Object.create(executor.adapter, {
    acquireMigrationLock: { value: async () => {} },
    releaseMigrationLock: { value: async () => {} },
  }) as DialectAdapter
  const executorView = new Proxy(executor, {
    get: (target, property) =>
      property === 'adapter' ? adapter : bound(target, Reflect.get(target, property, target)),
  })
  const view: Kysely<DB> = new Proxy(db, {
    get(target, property) {
      if (property === 'connection') {
        return () => ({ execute: <T>(callback: (db: Kysely<DB>) => Promise<T>) => callback(view) })
      }
      if (property === 'getExecutor') {
        return () => executorView
      }
      return bound(target, Reflect.get(target, property, target))
    },
  })
  return view
}

/**
 * The database as the Migrator sees it: its check for its own tables looks in our schema only.
 * Kysely's PostgreSQL introspector reads every column of every table of every schema, calling
 * has_schema_privilege() by name, so a schema dropped meanwhile by anyone (another service's
 * migration; the tests' throwaway schemas) failed our migration with "schema … does not exist"
 * (test/migrations.test.ts reproduces it). Everything else is the database itself.
 */
function introspectingOnly<DB>(db: Kysely<DB>, schema: string): Kysely<DB> {
  const getTables = async () => {
    const { rows } = await sql<{ name: string }>`
      select tablename as name from pg_catalog.pg_tables where schemaname = ${schema}`.execute(db)
    return rows.map(({ name }) => ({ name, schema, isView: false, columns: [] }))
  }
  const introspection: DatabaseIntrospector = {
    getSchemas: async () => [{ name: schema }],
    getTables,
    getMetadata: async () => ({ tables: await getTables() }),
  }
  return new Proxy(db, {
    get(target, property) {
      if (property === 'introspection') {
        return introspection
      }
      return bound(target, Reflect.get(target, property, target))
    },
  })
}

/** Kysely's methods use private fields: they must run on the instance itself, not a proxy. */
const bound = (target: object, value: unknown): unknown => (typeof value === 'function' ? value.bind(target) : value)

function check(result: MigrationResultSet): string[] {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`migration ${failed ?? ''} failed: ${String(result.error)}`)
  }
  return (result.results ?? []).map((r) => r.migrationName)
}

/** Applies every pending migration; returns the names applied. */
export function migrateToLatest(handle: DatabaseHandle): Promise<string[]> {
  return withMigrator(handle, true, async (m) => check(await m.migrateToLatest()))
}

export function migrateDown(handle: DatabaseHandle): Promise<string[]> {
  return withMigrator(handle, true, async (m) => check(await m.migrateDown()))
}

/** True when every known migration has been applied (for /readyz). */
export function isMigrated(handle: DatabaseHandle): Promise<boolean> {
  return withMigrator(handle, false, async (m) =>
    (await m.getMigrations()).every((info) => info.executedAt !== undefined),
  )
}

export function migrationStatus(handle: DatabaseHandle) {
  return withMigrator(handle, false, async (m) =>
    (await m.getMigrations()).map((info) => ({
      name: info.name,
      executed_at: info.executedAt?.toISOString() ?? null,
    })),
  )
}

/** The names of the migrations this release has, as the migrations table records them. */
export const knownMigrations = (): string[] => Object.keys(migrations).map((name) => name.replace(/^m/, ''))
