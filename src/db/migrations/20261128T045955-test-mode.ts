// Test mode (docs/design.md#test-mode): every account gets its test environment, a tenant row of
// its own whose id is the account's + '_test' (src/accounts/tenant.ts), with a mark for the deletion
// of its data (src/accounts/test-data.ts); and every stored contact
// and event says it is live: `livemode` last in a contact's body, and after `created_at` at an
// event's top level as well as in its `data.object`.
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  // When set on a test environment, its data is being deleted (src/accounts/test-data.ts).
  await db.schema.alterTable('accounts').addColumn('purge_requested_at', 'text').execute()
  await sql`
    insert into accounts (id, name, created_at, updated_at)
    select id || '_test', name, created_at, updated_at from accounts where id not like ${'%\\_test'} escape '\\'`.execute(
    db,
  )
  await sql`
    update contacts set body = substr(body, 1, length(body) - 1) || ${',"livemode":true}'} where body like ${'%}'}`.execute(
    db,
  )
  // An event's body is {…,"created_at":…,"data":{"object":{…}}}: its first `,"data":` is its own
  // data member (no earlier member can hold that text), and it ends with the contact's } and }}.
  const at = dialect === 'postgres' ? sql`strpos(body, ${',"data":'})` : sql`instr(body, ${',"data":'})`
  await sql`
    update events set body = substr(body, 1, ${at} - 1) || ${',"livemode":true'}
      || substr(body, ${at}, length(body) - ${at} - 2) || ${',"livemode":true}}}'}
    where ${at} > 0 and body like ${'%}}}'}`.execute(db)
}

export async function down(db: MigrationDb): Promise<void> {
  await sql`update events set body = replace(body, ${',"livemode":true'}, '')`.execute(db)
  await sql`update contacts set body = replace(body, ${',"livemode":true'}, '')`.execute(db)
  await sql`delete from accounts where id like ${'%\\_test'} escape '\\'`.execute(db)
  await db.schema.alterTable('accounts').dropColumn('purge_requested_at').execute()
}
