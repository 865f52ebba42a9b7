// When and where a key was reported found in public (docs/key-safety.md, "Leaked-key reports"):
// the API & Webhooks page names it in a banner.
// Frozen: never edit a migration that has shipped; add a new one.
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('exposed_at', 'text').execute()
  await db.schema.alterTable('api_keys').addColumn('exposed_url', 'text').execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('exposed_url').execute()
  await db.schema.alterTable('api_keys').dropColumn('exposed_at').execute()
}
