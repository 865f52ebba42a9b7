// Runs the migrations in db/migrations through Kysely's Migrator, handing each the dialect.
import { type DatabaseIntrospector, type Kysely, type Migration, type MigrationResultSet, Migrator, sql } from 'kysely'
import type { DatabaseHandle } from './database.js'
import type { Dialect } from './dialect.js'
import type { MigrationDb } from './migration-helpers.js'
import * as migrations from './migrations/index.js'

interface MigrationModule {
  up(db: MigrationDb, dialect: Dialect): Promise<void>
  down?(db: MigrationDb, dialect: Dialect): Promise<void>
}

async function migrator(handle: DatabaseHandle): Promise<Migrator> {
  const provider = {
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
  // Kysely looks for its own tables in every schema; pin them to ours, or a database where
  // another schema (another service, a test run) has them would make us skip creating them.
  const schema =
    handle.dialect === 'postgres'
      ? (await sql<{ name: string }>`select current_schema() as name`.execute(handle.db)).rows[0]?.name
      : undefined
  return schema
    ? new Migrator({ db: introspectingOnly(handle.db, schema), provider, migrationTableSchema: schema })
    : new Migrator({ db: handle.db, provider })
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
      const value: unknown = Reflect.get(target, property, target)
      // Kysely's methods use private fields: they must run on the instance itself, not the proxy.
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

function check(result: MigrationResultSet): string[] {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`migration ${failed ?? ''} failed: ${String(result.error)}`)
  }
  return (result.results ?? []).map((r) => r.migrationName)
}

/** Applies every pending migration; returns the names applied. */
export async function migrateToLatest(handle: DatabaseHandle): Promise<string[]> {
  const m = await migrator(handle)
  return check(await m.migrateToLatest())
}

export async function migrateDown(handle: DatabaseHandle): Promise<string[]> {
  const m = await migrator(handle)
  return check(await m.migrateDown())
}

/** True when every known migration has been applied (for /readyz). */
export async function isMigrated(handle: DatabaseHandle): Promise<boolean> {
  const m = await migrator(handle)
  const all = await m.getMigrations()
  return all.every((m) => m.executedAt !== undefined)
}

export async function migrationStatus(handle: DatabaseHandle) {
  const m = await migrator(handle)
  return (await m.getMigrations()).map((info) => ({
    name: info.name,
    executed_at: info.executedAt?.toISOString() ?? null,
  }))
}
