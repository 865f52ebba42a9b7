// Initial schema. Frozen: never edit a migration that has shipped; add a new one.
// Every tenant table leads its primary key, unique indexes and foreign keys with account_id.
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute()

  await db.schema
    .createTable('api_keys')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull())
    .addColumn('last4', 'text', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('revoked_at', 'text')
    .addColumn('last_used_at', 'text')
    .addPrimaryKeyConstraint('api_keys_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('api_keys'))
    .execute()
  // The one unique index without account_id: authentication finds the account from the key,
  // so this lookup cannot know the tenant yet (on Citus, api_keys would be a reference table).
  await db.schema.createIndex('api_keys_key_hash_key').unique().on('api_keys').column('key_hash').execute()
  // `keys revoke KEY_ID` in the CLI names a key without its account.
  await db.schema.createIndex('api_keys_id_idx').on('api_keys').column('id').execute()

  await db.schema
    .createTable('contacts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('email_lower', 'text')
    .addColumn('search', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('contacts_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('contacts'))
    .execute()
  await db.schema
    .createIndex('contacts_account_email_key')
    .unique()
    .on('contacts')
    .columns(['account_id', 'email_lower'])
    .execute()

  await db.schema
    .createTable('contact_tags')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addColumn('contact_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_tags_pkey', ['account_id', 'tag', 'contact_id'])
    .addForeignKeyConstraint(
      'contact_tags_contact_fk',
      ['account_id', 'contact_id'],
      'contacts',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
  // Serves the cascade from contacts and the rewrite of one contact's tags.
  await db.schema
    .createIndex('contact_tags_contact_idx')
    .on('contact_tags')
    .columns(['account_id', 'contact_id'])
    .execute()

  await db.schema
    .createTable('events')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('events_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('events'))
    .execute()
  await db.schema.createIndex('events_account_type_idx').on('events').columns(['account_id', 'type', 'id']).execute()
}

export async function down(db: MigrationDb): Promise<void> {
  for (const table of ['events', 'contact_tags', 'contacts', 'api_keys', 'accounts']) {
    await db.schema.dropTable(table).execute()
  }
}
