// Runs the migrations in db/migrations through Kysely's Migrator, handing each the dialect.
import { type Kysely, type Migration, type MigrationResultSet, Migrator } from 'kysely'
import type { DatabaseHandle } from './database.js'
import type { Dialect } from './dialect.js'
import * as migrations from './migrations/index.js'

interface MigrationModule {
  // biome-ignore lint/suspicious/noExplicitAny: migrations run against an untyped schema
  up(db: Kysely<any>, dialect: Dialect): Promise<void>
  // biome-ignore lint/suspicious/noExplicitAny: as above
  down?(db: Kysely<any>, dialect: Dialect): Promise<void>
}

function migrator(handle: DatabaseHandle): Migrator {
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
  return new Migrator({ db: handle.db, provider })
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
  return check(await migrator(handle).migrateToLatest())
}

export async function migrateDown(handle: DatabaseHandle): Promise<string[]> {
  return check(await migrator(handle).migrateDown())
}

/** True when every known migration has been applied (for /readyz). */
export async function isMigrated(handle: DatabaseHandle): Promise<boolean> {
  const all = await migrator(handle).getMigrations()
  return all.every((m) => m.executedAt !== undefined)
}

export async function migrationStatus(handle: DatabaseHandle) {
  return (await migrator(handle).getMigrations()).map((m) => ({
    name: m.name,
    executed_at: m.executedAt?.toISOString() ?? null,
  }))
}
