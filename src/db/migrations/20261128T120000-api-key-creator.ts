// Who created each API key, so that removing a person can revoke the keys they made
// (docs/web-app.md, "Removing a person"). Existing keys learn it from the audit log: the
// api_key.created entry, or for a key made by a roll, the api_key.rolled entry that names it.
// A key made on the command line has no creator.
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('created_by_user_id', 'text').execute()
  await sql`
    update api_keys set created_by_user_id = (
      select a.actor_user_id from audit_log a
      where a.account_id = api_keys.account_id and a.actor_user_id is not null and (
        (a.action = 'api_key.created' and a.target_id = api_keys.id)
        or (a.action = 'api_key.rolled' and a.detail like ('%"new_key_id":"' || api_keys.id || '"%')))
      order by a.at limit 1)`.execute(db)
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('created_by_user_id').execute()
}
