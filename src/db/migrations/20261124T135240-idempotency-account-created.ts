// An account's kept idempotency answers by age, so the oldest beyond IDEMPOTENCY_KEYS_PER_ACCOUNT
// are found without a scan of the account's keys (src/idempotency/idempotency.ts, trimKeys).
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createIndex('idempotency_keys_account_created_idx')
    .on('idempotency_keys')
    .columns(['account_id', 'created_at'])
    .execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropIndex('idempotency_keys_account_created_idx').execute()
}
