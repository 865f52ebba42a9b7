// Idempotency keys: the first response to a POST, kept per account for 24 hours.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    // Null while the first request is in flight.
    .addColumn('status', 'integer')
    .addColumn('body', 'text')
    .addColumn('location', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pkey', ['account_id', 'key'])
    .$call(accountForeignKey('idempotency_keys'))
    .execute()
  // Serves the purge of expired keys across accounts.
  await db.schema.createIndex('idempotency_keys_expires_idx').on('idempotency_keys').column('expires_at').execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute()
}
