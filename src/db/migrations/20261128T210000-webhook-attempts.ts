// Every attempt of a webhook delivery (GET …/deliveries/{id}/attempts), oldest first by its number;
// the delivery row keeps its last attempt too, for the list. Deleted with its delivery.
// Frozen: never edit a migration that has shipped; add a new one.
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb): Promise<void> {
  await db.schema
    .createTable('webhook_attempts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    // 1 for the delivery's first attempt: the delivery's `attempts` after this one.
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('response_excerpt', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_attempts_pkey', ['account_id', 'delivery_id', 'attempt'])
    .addForeignKeyConstraint(
      'webhook_attempts_delivery_fk',
      ['account_id', 'delivery_id'],
      'webhook_deliveries',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('webhook_attempts').execute()
}
