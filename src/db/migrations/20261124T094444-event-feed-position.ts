// The events feed in commit order (src/events/feed-position.ts): each event gets `tx_id`, its
// position, and the feed's indexes order by (tx_id, id) behind account_id (and type).
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  // Existing events committed long ago: position 0 keeps their old order (by id) and puts them
  // before every event written from now on. A constant default adds the column without rewriting
  // the table on PostgreSQL (11+); SQLite cannot drop it afterwards, and every event write sets it.
  await db.schema
    .alterTable('events')
    .addColumn('tx_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute()
  if (dialect === 'postgres') {
    // From now on the writing transaction's id: also for an instance still running the previous
    // release during a rolling deploy (it does not set tx_id). Only new rows take it; no rewrite.
    await sql`alter table events alter column tx_id set default (pg_current_xact_id()::text::bigint)`.execute(db)
  }
  // SQLite's counter of positions (one row); unused on PostgreSQL, kept for schema parity.
  await db.schema
    .createTable('event_sequence')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('last_position', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('event_sequence_pkey', ['name'])
    .execute()
  await db.insertInto('event_sequence').values({ name: 'events', last_position: 0 }).execute()

  await db.schema.dropIndex('events_account_type_idx').execute()
  await db.schema
    .createIndex('events_account_position_idx')
    .on('events')
    .columns(['account_id', 'tx_id', 'id'])
    .execute()
  await db.schema
    .createIndex('events_account_type_position_idx')
    .on('events')
    .columns(['account_id', 'type', 'tx_id', 'id'])
    .execute()
  // Serves the retention purge, which runs across accounts (like sign_in_failures_at_idx).
  await db.schema.createIndex('events_created_at_idx').on('events').column('created_at').execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropIndex('events_created_at_idx').execute()
  await db.schema.dropIndex('events_account_type_position_idx').execute()
  await db.schema.dropIndex('events_account_position_idx').execute()
  await db.schema.createIndex('events_account_type_idx').on('events').columns(['account_id', 'type', 'id']).execute()
  await db.schema.dropTable('event_sequence').execute()
  await db.schema.alterTable('events').dropColumn('tx_id').execute()
}
