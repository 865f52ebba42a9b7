// Runs once before the suites: the PostgreSQL server leg runs when TEST_DATABASE_URL is set,
// must run in CI, and is skipped locally with a one-line hint. PGlite is created and migrated
// once here and its data directory dumped to a file: each harness loads the dump (~0.4 s) instead
// of creating a PGlite (~1 s on a quiet machine, 3-4 s under load) and migrating it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { Kysely } from 'kysely'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { wrap } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import type { Database } from '../src/db/schema.js'
import { testDialects } from './dialects.js'
import { pgliteDialect } from './pglite-dialect.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** A tarball of a migrated PGlite data directory (`dumpDataDir('none')`), absent without the pglite leg. */
    pgliteDump: string | undefined
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  await checkPostgresServer()
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-tests-'))
  project.provide('pgliteDump', testDialects().includes('pglite') ? await dumpMigratedPglite(dir) : undefined)
  return () => rmSync(dir, { recursive: true, force: true })
}

async function checkPostgresServer(): Promise<void> {
  const url = process.env.TEST_DATABASE_URL
  if (!url) {
    if (process.env.CI === 'true') {
      throw new Error('CI=true but TEST_DATABASE_URL is not set: the PostgreSQL server leg is required in CI.')
    }
    console.log(
      'PostgreSQL server leg skipped (SQLite and PGlite run). Enable it: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm test',
    )
    return
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  try {
    await client.connect()
    await client.query('select 1')
  } catch (error) {
    throw new Error(`TEST_DATABASE_URL is set but PostgreSQL is unreachable: ${(error as Error).message}`)
  } finally {
    await client.end().catch(() => {})
  }
}

/** Uncompressed: loading it is ~0.1 s faster than the gzip dump, and it is only a temp file (~40 MB). */
async function dumpMigratedPglite(dir: string): Promise<string> {
  const pglite = await PGlite.create()
  try {
    await migrateToLatest(wrap(new Kysely<Database>({ dialect: pgliteDialect(pglite) }), 'postgres'))
    const file = path.join(dir, 'pglite-migrated.tar')
    writeFileSync(file, Buffer.from(await (await pglite.dumpDataDir('none')).arrayBuffer()))
    return file
  } finally {
    await pglite.close()
  }
}
