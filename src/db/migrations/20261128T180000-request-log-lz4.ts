// The request log's chunks compressed with LZ4 on PostgreSQL where the server has it: each chunk
// is a JSON text far over the TOAST threshold, and PostgreSQL's default compression (pglz) costs
// several times LZ4's CPU on every write (docs/performance.md, "The request log"). Only new values
// change; a server built without LZ4 keeps pglz.
// Frozen: never edit a migration that has shipped; add a new one.
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(db: MigrationDb, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres' && (await hasLz4(db))) {
    await sql`alter table request_log_chunks alter column entries set compression lz4`.execute(db)
  }
}

export async function down(db: MigrationDb, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres' && (await hasLz4(db))) {
    await sql`alter table request_log_chunks alter column entries set compression default`.execute(db)
  }
}

async function hasLz4(db: MigrationDb): Promise<boolean> {
  const { rows } = await sql<{ lz4: boolean }>`
    select coalesce(bool_or('lz4' = any(enumvals)), false) as lz4
    from pg_settings where name = 'default_toast_compression'`.execute(db)
  return rows[0]?.lz4 === true
}
