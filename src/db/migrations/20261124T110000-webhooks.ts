// Webhook endpoints, their deliveries, and the dispatch cursor (src/webhooks/).
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    // JSON array of event types, or ["*"].
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    // Signing secrets, encrypted (src/webhooks/secrets.ts); the previous one lives until its expiry.
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('previous_secret', 'text')
    .addColumn('previous_secret_expires_at', 'text')
    // When the current run of failures began (null after a success): 5 days of them disable it.
    .addColumn('failing_since', 'text')
    // The worker's hint: no delivery of this endpoint is due before this time (null: none pending).
    .addColumn('due_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_endpoints_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('webhook_endpoints'))
    .execute()
  // The worker's question across accounts: which endpoints have a delivery due?
  await db.schema.createIndex('webhook_endpoints_due_idx').on('webhook_endpoints').column('due_at').execute()

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('endpoint_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('event_created_at', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    // When the next attempt is due; while one is under way, when its lease runs out. Null when final.
    .addColumn('next_attempt_at', 'text')
    .addColumn('lease_expires_at', 'text')
    .addColumn('last_attempt_at', 'text')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_duration_ms', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('last_response_excerpt', 'text')
    // The body to send when it is not an event's (webhook.test); null otherwise.
    .addColumn('payload', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_deliveries_pkey', ['account_id', 'id'])
    .addForeignKeyConstraint(
      'webhook_deliveries_endpoint_fk',
      ['account_id', 'endpoint_id'],
      'webhook_endpoints',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
  // One endpoint's deliveries: its list (by id) and the worker's claim (by next attempt).
  await db.schema
    .createIndex('webhook_deliveries_endpoint_idx')
    .on('webhook_deliveries')
    .columns(['account_id', 'endpoint_id', 'id'])
    .execute()
  await db.schema
    .createIndex('webhook_deliveries_due_idx')
    .on('webhook_deliveries')
    .columns(['account_id', 'endpoint_id', 'next_attempt_at'])
    .execute()
  // The retention purge, across accounts.
  await db.schema
    .createIndex('webhook_deliveries_created_at_idx')
    .on('webhook_deliveries')
    .column('created_at')
    .execute()

  // Where the fan-out has got to in the events feed (one row): events after it get deliveries.
  await db.schema
    .createTable('webhook_dispatch')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('tx_id', 'bigint', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_dispatch_pkey', ['name'])
    .execute()
  // Events that exist now had no endpoint to go to: the fan-out starts after the last of them.
  await sql`
    insert into webhook_dispatch (name, tx_id, event_id)
    select 'events', coalesce(max(tx_id), 0), '' from events`.execute(db)
  await sql`
    update webhook_dispatch set event_id = coalesce(
      (select max(id) from events where tx_id = webhook_dispatch.tx_id), '')`.execute(db)
  // The fan-out walks the feed across accounts, in position order.
  await db.schema.createIndex('events_position_idx').on('events').columns(['tx_id', 'id']).execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropIndex('events_position_idx').execute()
  await db.schema.dropTable('webhook_dispatch').execute()
  await db.schema.dropTable('webhook_deliveries').execute()
  await db.schema.dropTable('webhook_endpoints').execute()
}
