// The audit log of sensitive account actions (API keys issued, rolled, revoked): src/audit/.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('audit_log')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    // No foreign key: the entry outlives the person who acted.
    .addColumn('actor_user_id', 'text')
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target_id', 'text', (c) => c.notNull())
    .addColumn('detail', 'text', (c) => c.notNull())
    .addColumn('ip', 'text')
    .addPrimaryKeyConstraint('audit_log_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('audit_log'))
    .execute()
  // Serves the hourly budget of key changes (the id order is creation order, not `at`'s under a test clock).
  await db.schema.createIndex('audit_log_account_at_idx').on('audit_log').columns(['account_id', 'at']).execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('audit_log').execute()
}
