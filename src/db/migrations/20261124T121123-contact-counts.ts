// Each account's number of contacts, for MAX_CONTACTS_PER_ACCOUNT, spread over a few rows per
// account so concurrent writers do not queue on one (src/contacts/contact-count.ts).
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('contact_counts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('shard', 'integer', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_counts_pkey', ['account_id', 'shard'])
    .$call(accountForeignKey('contact_counts'))
    .execute()
  // The contacts that exist now, in shard 0.
  await sql`
    insert into contact_counts (account_id, shard, n)
    select account_id, 0, count(*) from contacts group by account_id`.execute(db)
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('contact_counts').execute()
}
