// Idempotency keys: the first response to a POST, kept per account for 24 hours.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// biome-ignore lint/suspicious/noExplicitAny: migrations are frozen in time and must not depend on today's schema types
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
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
    .addForeignKeyConstraint('idempotency_keys_account_fk', ['account_id'], 'accounts', ['id'], (fk) =>
      fk.onDelete('cascade'),
    )
    .execute()
  // Serves the purge of expired keys across accounts.
  await db.schema.createIndex('idempotency_keys_expires_idx').on('idempotency_keys').column('expires_at').execute()
}

// biome-ignore lint/suspicious/noExplicitAny: see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute()
}
