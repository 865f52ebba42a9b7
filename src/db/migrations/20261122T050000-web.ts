// People, their memberships in accounts, web sessions, and per-key daily request counts.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('email_lower', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('users_email_key').unique().on('users').column('email_lower').execute()

  await db.schema
    .createTable('memberships')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('memberships_pkey', ['account_id', 'user_id'])
    .$call(accountForeignKey('memberships'))
    .addForeignKeyConstraint('memberships_user_fk', ['user_id'], 'users', ['id'], (fk) => fk.onDelete('cascade'))
    .execute()
  // "Which accounts may this person see?" is asked on every page.
  await db.schema.createIndex('memberships_user_idx').on('memberships').columns(['user_id', 'account_id']).execute()

  await db.schema
    .createTable('sessions')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addForeignKeyConstraint('sessions_user_fk', ['user_id'], 'users', ['id'], (fk) => fk.onDelete('cascade'))
    .execute()
  await db.schema.createIndex('sessions_user_idx').on('sessions').column('user_id').execute()

  await db.schema
    .createTable('api_key_usage')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('requests', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('api_key_usage_pkey', ['account_id', 'key_id', 'day'])
    .addForeignKeyConstraint('api_key_usage_key_fk', ['account_id', 'key_id'], 'api_keys', ['account_id', 'id'], (fk) =>
      fk.onDelete('cascade'),
    )
    .execute()
}

export async function down(db: MigrationDb): Promise<void> {
  for (const table of ['api_key_usage', 'sessions', 'memberships', 'users']) {
    await db.schema.dropTable(table).execute()
  }
}
