// An import's upload stored in parts of at most 256 KiB (src/imports/imports.store.ts,
// IMPORT_PART_BYTES), a statement each with a turn of the event loop between: on SQLite one
// statement that stored a whole file held the event loop too long (docs/tenant-isolation.md).
// The parts are written before the job's row, so they have no foreign key to it (only to the
// account): a crash between the two leaves parts no job owns, which the account's next upload
// deletes once they are an hour old (`created_at`). Files of unfinished jobs move over as part 0.
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import { accountForeignKey, type MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('contact_import_file_parts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('import_id', 'text', (c) => c.notNull())
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_import_file_parts_pkey', ['account_id', 'import_id', 'part'])
    .$call(accountForeignKey('contact_import_file_parts'))
    .execute()
  await sql`
    insert into contact_import_file_parts (account_id, import_id, part, created_at, data)
    select f.account_id, f.import_id, 0, i.created_at, f.data
    from contact_import_files f
    join contact_imports i on i.account_id = f.account_id and i.id = f.import_id`.execute(db)
  await db.schema.dropTable('contact_import_files').execute()
}

export async function down(db: MigrationDb, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('contact_import_files')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('import_id', 'text', (c) => c.notNull())
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
  // Only single-part files come back whole; a job with a split file loses it (and fails when resumed).
  await sql`
    insert into contact_import_files (account_id, import_id, data)
    select p.account_id, p.import_id, p.data
    from contact_import_file_parts p
    join contact_imports i on i.account_id = p.account_id and i.id = p.import_id
    where p.part = 0 and not exists (
      select 1 from contact_import_file_parts q
      where q.account_id = p.account_id and q.import_id = p.import_id and q.part = 1)`.execute(db)
  await db.schema.dropTable('contact_import_file_parts').execute()
}
