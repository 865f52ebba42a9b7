// Failed sign-ins, counted in the database so that every instance throttles alike (src/web/throttle.ts).
// Not a tenant table: a failed sign-in belongs to no account.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('sign_in_failures')
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sign_in_failures_pkey', ['id'])
    .execute()
  await db.schema.createIndex('sign_in_failures_key_at_idx').on('sign_in_failures').columns(['key', 'at']).execute()
  // Serves the purge of old failures across keys.
  await db.schema.createIndex('sign_in_failures_at_idx').on('sign_in_failures').column('at').execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('sign_in_failures').execute()
}
