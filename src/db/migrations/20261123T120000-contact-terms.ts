// The index behind the `q` filter of GET /contacts (docs/performance.md): one row per value a
// contact's `search` holds, so a rare prefix is a short range of an index instead of a walk of the
// whole account. Tenant first, like every index; filled from the existing `search` column.
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

const BATCH = 2000

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('contact_terms')
    .addColumn('account_id', 'text', (c) => c.notNull())
    // Code-point order on PostgreSQL too (SQLite's default already is), so a prefix is a range.
    .addColumn('term', dialect === 'postgres' ? sql`text collate "C"` : 'text', (c) => c.notNull())
    .addColumn('contact_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_terms_pkey', ['account_id', 'term', 'contact_id'])
    .addForeignKeyConstraint(
      'contact_terms_contact_fk',
      ['account_id', 'contact_id'],
      'contacts',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
  // Serves the cascade from contacts and the rewrite of one contact's terms.
  await db.schema
    .createIndex('contact_terms_contact_idx')
    .on('contact_terms')
    .columns(['account_id', 'contact_id'])
    .execute()

  // `search` is "\n" + each distinct value, lower-cased, white space collapsed.
  let after: { account_id: string; id: string } | undefined
  for (;;) {
    let query = db
      .selectFrom('contacts')
      .select(['account_id', 'id', 'search'])
      .orderBy('account_id')
      .orderBy('id')
      .limit(BATCH)
    if (after) {
      const { account_id, id } = after
      query = query.where((eb) =>
        eb.or([eb('account_id', '>', account_id), eb.and([eb('account_id', '=', account_id), eb('id', '>', id)])]),
      )
    }
    const contacts: Array<{ account_id: string; id: string; search: string }> = await query.execute()
    const terms = contacts.flatMap(({ account_id, id, search }) =>
      [...new Set(search.split('\n').slice(1))].map((term) => ({ account_id, term, contact_id: id })),
    )
    if (terms.length > 0) {
      await db.insertInto('contact_terms').values(terms).execute()
    }
    if (contacts.length < BATCH) {
      return
    }
    after = contacts[contacts.length - 1]
  }
}

export async function down(db: MigrationDb): Promise<void> {
  await db.schema.dropTable('contact_terms').execute()
}
