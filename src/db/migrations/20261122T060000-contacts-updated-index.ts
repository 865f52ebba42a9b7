// The index behind the `updated_after` filter of GET /contacts (docs/performance.md): without it,
// "what changed in the last minute" walked the whole account. Tenant first, like every index.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createIndex('contacts_account_updated_idx')
    .on('contacts')
    .columns(['account_id', 'updated_at'])
    .execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropIndex('contacts_account_updated_idx').execute()
}
