// CSV imports as jobs (src/imports/): the job's state and progress and the problems found, and
// apart from it the uploaded file (a row updated at every chunk must not carry 5 MiB: SQLite
// rewrote the whole row, blob included, at each progress update). One unfinished import per account is a partial unique index, so two uploads
// racing cannot both start; the runner finds unfinished jobs of every account by a small partial
// index (only unfinished rows are in it).
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('contact_imports')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('file_name', 'text', (c) => c.notNull())
    .addColumn('rows_total', 'integer')
    .addColumn('rows_validated', 'integer', (c) => c.notNull())
    .addColumn('rows_written', 'integer', (c) => c.notNull())
    .addColumn('created', 'integer', (c) => c.notNull())
    .addColumn('updated', 'integer', (c) => c.notNull())
    .addColumn('unchanged', 'integer', (c) => c.notNull())
    .addColumn('error_count', 'integer', (c) => c.notNull())
    .addColumn('errors', 'text')
    .addColumn('lease_expires_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .addPrimaryKeyConstraint('contact_imports_pkey', ['account_id', 'id'])
    .$call(accountForeignKey('contact_imports'))
    .execute()
  await db.schema
    .createTable('contact_import_files')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('import_id', 'text', (c) => c.notNull())
    // The upload as sent (at most 5 MiB), until the job ends; bytes, since a file that is not
    // UTF-8 (or has U+0000, which PostgreSQL text cannot hold) is reported by the job.
    .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_import_files_pkey', ['account_id', 'import_id'])
    .addForeignKeyConstraint(
      'contact_import_files_import_fk',
      ['account_id', 'import_id'],
      'contact_imports',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
  await sql`
    create unique index contact_imports_one_unfinished_key on contact_imports (account_id)
    where state in ('queued', 'validating', 'writing')`.execute(db)
  await sql`
    create index contact_imports_unfinished_idx on contact_imports (created_at)
    where state in ('queued', 'validating', 'writing')`.execute(db)
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('contact_import_files').execute()
  await db.schema.dropTable('contact_imports').execute()
}
