// The request log (docs/request-log.md), stored in chunks: each row holds up to a batch of one
// tenant's entries, keyed by its newest Request-Id, with its oldest beside it, so a write is one
// row per batch rather than one per request. Per tenant and UTC day, the requests received, which
// caps how many are stored.
// Frozen: never edit a migration that has shipped; add a new one.
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb): Promise<void> {
  await db.schema
    .createTable('request_log_chunks')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('last_id', 'text', (c) => c.notNull())
    .addColumn('first_id', 'text', (c) => c.notNull())
    .addColumn('entry_count', 'integer', (c) => c.notNull())
    // A JSON array of the entries, oldest first, each an array of its fields (request-logs.store.ts).
    .addColumn('entries', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('request_log_chunks_pkey', ['account_id', 'last_id'])
    .$call(accountForeignKey('request_log_chunks'))
    .execute()
  await db.schema
    .createTable('request_log_days')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('received', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('request_log_days_pkey', ['account_id', 'day'])
    .$call(accountForeignKey('request_log_days'))
    .execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('request_log_days').execute()
  await db.schema.dropTable('request_log_chunks').execute()
}
