// The index behind the `updated_after` filter of GET /contacts (docs/performance.md): without it,
// "what changed in the last minute" walked the whole account. Tenant first, like every index.
// Frozen: never edit a migration that has shipped; add a new one.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// biome-ignore lint/suspicious/noExplicitAny: migrations are frozen in time and must not depend on today's schema types
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createIndex('contacts_account_updated_idx')
    .on('contacts')
    .columns(['account_id', 'updated_at'])
    .execute()
}

// biome-ignore lint/suspicious/noExplicitAny: see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('contacts_account_updated_idx').execute()
}
