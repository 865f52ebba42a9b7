// Invitations to join an account (a single-use link, 7 days, stored as a digest: docs/web-app.md), and
// what the sessions page shows of each session (last seen, browser), with an index for the purge
// of expired sessions.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('invitations')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('email_lower', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('invited_by', 'text', (c) => c.notNull())
    .addColumn('client_key_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('accepted_at', 'text')
    .addColumn('accepted_by', 'text')
    .addColumn('revoked_at', 'text')
    .addPrimaryKeyConstraint('invitations_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('invitations'))
    .execute()
  // The link finds its invitation by the token's digest alone, as a request finds its API key.
  await db.schema.createIndex('invitations_token_hash_key').unique().on('invitations').column('token_hash').execute()
  // The invitations form's throttle counts an address's recent invitations across accounts.
  await db.schema
    .createIndex('invitations_client_idx')
    .on('invitations')
    .columns(['client_key_hash', 'created_at'])
    .execute()

  await db.schema.alterTable('sessions').addColumn('last_seen_at', 'text').execute()
  await db.schema.alterTable('sessions').addColumn('user_agent', 'text').execute()
  await db.schema.createIndex('sessions_expires_idx').on('sessions').column('expires_at').execute()
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropIndex('sessions_expires_idx').execute()
  await db.schema.alterTable('sessions').dropColumn('user_agent').execute()
  await db.schema.alterTable('sessions').dropColumn('last_seen_at').execute()
  await db.schema.dropTable('invitations').execute()
}
