// Test harness: a fresh database of the given dialect, the app on it, and helpers that seed
// accounts with keys and send requests as them through app.inject.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { Kysely, sql } from 'kysely'
import pg from 'pg'
import { inject } from 'vitest'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { testTenant } from '../src/accounts/tenant.js'
import { FULL_SCOPES, type Scope } from '../src/api-keys/api-key.js'
import { issueApiKey } from '../src/api-keys/api-keys.store.js'
import { buildApp } from '../src/app.js'
import { type Config, type DatabaseConfig, loadConfig } from '../src/config.js'
import { type DatabaseHandle, openDatabase, wrap } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import type { Database } from '../src/db/schema.js'
import { closeDeps, createDeps, type Deps } from '../src/deps.js'
import type { Clock } from '../src/lib/clock.js'
import type { Resolver } from '../src/webhooks/webhook-url.js'
import type { TestDialect } from './dialects.js'
import { pgliteDialect } from './pglite-dialect.js'

export interface TestAccount {
  id: string
  name: string
  key: string
  keyId: string
}

export interface TestHarness {
  app: FastifyInstance
  deps: Deps
  db: Kysely<Database>
  dialect: TestDialect
  createAccount(name?: string): Promise<TestAccount>
  /** Another key of the account; with `test`, a service_test_ key of its test mode. */
  createKey(
    account: TestAccount,
    options?: { scopes?: Scope[]; expiresAt?: Date | null; test?: boolean },
  ): Promise<string>
  /** The account as its test-mode key sees it: the same id, requests made with a new test key. */
  testMode(account: TestAccount): Promise<TestAccount>
  /** A request as this account (its key in Authorization), or unauthenticated with null. */
  inject(account: TestAccount | null, options: InjectOptions): Promise<LightMyRequestResponse>
  close(): Promise<void>
}

export const TEST_SECRET = 'test-secret-0123456789abcdef0123456789abcdef'

export async function createTestHarness(options: {
  dialect: TestDialect
  clock?: Clock
  env?: Record<string, string>
  /** Host names for webhook URLs (test/static-resolver.ts): no test touches real DNS. */
  resolve?: Resolver
  /**
   * SQLite in a file of a temporary directory instead of in memory: what other connections can
   * open (the CSV import's worker thread writes on one of its own).
   */
  sqliteFile?: boolean
}): Promise<TestHarness> {
  // Rate limits are off unless a test turns them on: suites send hundreds of requests at once.
  const config = loadConfig({
    SECRET: TEST_SECRET,
    API_URL: 'http://api.test',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_SECOND: '0',
    AUTH_FAILURES_PER_MINUTE: '0',
    // Suites sign up dozens of people from one address; the sign-up tests turn it on.
    SIGN_UPS_PER_HOUR: '0',
    ...options.env,
  })
  const { database, dispose } = await openTestDatabase(options.dialect, {
    migrated: true,
    sqliteFile: options.sqliteFile === true,
  })
  // A no-op on the migrated PGlite dump, unless a migration was added since the global setup made it.
  await migrateToLatest(database)
  const deps = createDeps(config, {
    database,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.resolve ? { resolve: options.resolve } : {}),
  })
  const app = await buildApp(deps, { logger: false })
  await app.ready()

  const harness: TestHarness = {
    app,
    deps,
    db: database.db,
    dialect: options.dialect,
    async createAccount(name = 'Acme') {
      const created = await createAccountWithKey(database.db, {
        name,
        now: deps.clock.now(),
        keyPrefix: config.keyPrefix,
      })
      return { id: created.account.id, name, key: created.secret, keyId: created.apiKey.id }
    },
    async createKey(account, keyOptions = {}) {
      const tenantId = keyOptions.test ? testTenant(account.id).id : account.id
      const { secret } = await issueApiKey(database.db, tenantId, {
        name: 'Extra',
        scopes: keyOptions.scopes ?? FULL_SCOPES,
        expiresAt: keyOptions.expiresAt ?? null,
        now: deps.clock.now(),
        prefix: config.keyPrefix,
        createdBy: null,
      })
      return secret
    },
    async testMode(account) {
      const { secret, apiKey } = await issueApiKey(database.db, testTenant(account.id).id, {
        name: 'Test',
        scopes: FULL_SCOPES,
        expiresAt: null,
        now: deps.clock.now(),
        prefix: config.keyPrefix,
        createdBy: null,
      })
      return { ...account, key: secret, keyId: apiKey.id }
    },
    async inject(account, request) {
      const headers = { ...(account ? { authorization: `Bearer ${account.key}` } : {}), ...request.headers }
      if (options.dialect === 'postgres' && isFeedRead(request)) {
        await feedCaughtUp(database.db)
      }
      return app.inject({ ...request, headers })
    },
    async close() {
      await app.close()
      await closeDeps(deps)
      await dispose()
    },
  }
  return harness
}

const isFeedRead = (request: InjectOptions): boolean =>
  (request.method ?? 'GET') === 'GET' && /^\/api\/v1\/events(\?|$)/.test(String(request.url ?? ''))

/**
 * Waits until the events feed serves every event committed so far. On the PostgreSQL server it
 * serves an event once every transaction that began before it has ended (docs/api-decisions.md,
 * "The events feed: commit order"), and transaction ids are server-wide: another suite's open
 * transaction, in any database of the server, holds the feed back for a moment. A suite's own
 * reads expect their writes, so they wait for that moment to pass; test/events-feed-order.test.ts,
 * which tests the fence itself, reads with app.inject. A lagging feed is complete in the end, and
 * this waits for nothing else: an event missing for good still fails the test.
 */
async function feedCaughtUp(db: Kysely<Database>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    // A test that broke the schema on purpose gets its answer from the request itself.
    const caughtUp = await sql<{ caught_up: boolean }>`
      select coalesce(max(tx_id), 0) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint as caught_up
      from events`
      .execute(db)
      .then(
        ({ rows }) => rows[0]?.caught_up ?? true,
        () => true,
      )
    if (caughtUp || Date.now() > deadline) {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** A config as the service would load it, for tests that need one without a harness. */
export const testConfig = (env: Record<string, string> = {}): Config =>
  loadConfig({ SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...env })

let pgliteDump: Blob | undefined
/**
 * Migrated PGlites that closed harnesses gave back, emptied, for the next harness of this test
 * worker (files share a worker's modules: vitest.config.ts, `isolate: false`): a TRUNCATE of every
 * table costs ~20 ms where loading the dump costs ~0.4 s of wall time (0.9 s of CPU under the full
 * suite), so a suite can afford a fresh database per test. They live as long as the worker.
 */
const idlePglites: PGlite[] = []
/** More than a file ever holds open at once; a harness given back beyond it is closed. */
const IDLE_PGLITES_MAX = 4

/**
 * A fresh database of the dialect: empty, or with `migrated` the PGlite leg starts migrated (a
 * given-back instance, emptied, or one loaded from the dump the global setup made); SQLite in
 * memory and a PostgreSQL schema migrate in tens of milliseconds, so they start empty. The caller
 * still runs `migrateToLatest`. `dispose` removes what outlives it (the PostgreSQL schema, the
 * SQLite file's directory); it does not close it.
 */
export async function openTestDatabase(
  dialect: TestDialect,
  options: { migrated?: boolean; sqliteFile?: boolean } = {},
): Promise<{ database: DatabaseHandle; dispose(): Promise<void> }> {
  if (dialect === 'sqlite' && options.sqliteFile) {
    const dir = mkdtempSync(path.join(tmpdir(), 'contacts-test-'))
    return {
      database: openDatabase({ kind: 'sqlite', path: path.join(dir, 'contacts.sqlite'), synchronous: 'NORMAL' }),
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    }
  }
  if (dialect === 'sqlite') {
    return {
      database: openDatabase({ kind: 'sqlite', path: ':memory:', synchronous: 'NORMAL' }),
      dispose: async () => {},
    }
  }
  if (dialect === 'pglite') {
    const pglite = options.migrated ? (idlePglites.pop() ?? (await loadMigratedPglite())) : await PGlite.create()
    const destroy = options.migrated ? () => giveBack(pglite) : () => pglite.close()
    return {
      database: wrap(new Kysely<Database>({ dialect: pgliteDialect(pglite, destroy) }), 'postgres'),
      dispose: async () => {},
    }
  }
  const schema = await createThrowawaySchema()
  return {
    database: openDatabase(schema.database),
    dispose: () => schema.drop(),
  }
}

export interface ThrowawaySchema {
  name: string
  /** What the app connects to: the schema on the server, or through the pooler (TEST_POOLER_URL). */
  database: Extract<DatabaseConfig, { kind: 'postgres' }>
  /** The same as a server process's environment (DATABASE_URL, and the pooler's settings). */
  env: Record<string, string>
  drop(): Promise<void>
}

/**
 * The real server: a throwaway schema inside TEST_DATABASE_URL's database. With TEST_POOLER_URL
 * (a transaction-mode PgBouncer in front of that database: .ci/pgbouncer-leg.sh) the app reaches it
 * through the pooler, which passes no `options` startup parameter and keeps no session settings:
 * the schema then gets a login role of its own whose default search_path is the schema (its name),
 * and the app connects as that role. Schemas and roles are made and dropped on the server directly.
 */
export async function createThrowawaySchema(prefix = 'test'): Promise<ThrowawaySchema> {
  const url = process.env.TEST_DATABASE_URL
  if (!url) {
    throw new Error('TEST_DATABASE_URL is not set')
  }
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  const poolerUrl = process.env.TEST_POOLER_URL
  if (!poolerUrl) {
    await adminQuery(url, `create schema ${name}`)
    const scoped = new URL(url)
    scoped.searchParams.set('options', `-c search_path=${name}`)
    return {
      name,
      database: { kind: 'postgres', url: scoped.toString() },
      env: { DATABASE_URL: scoped.toString() },
      drop: () => adminQuery(url, `drop schema if exists ${name} cascade`),
    }
  }
  // A role given back by a closed harness is used again: its pool in the pooler, and the server
  // connections in it, stay open (a new role per harness left 3 idle server connections each).
  const pooledName = idlePoolerRoles.pop()
  const role = pooledName ?? `${process.env.TEST_POOLER_ROLES ?? 'pooled'}_${randomBytes(6).toString('hex')}`
  await adminQuery(
    url,
    pooledName
      ? `create schema ${role} authorization ${role}`
      : `create role ${role} login; alter role ${role} set search_path = ${role}; create schema ${role} authorization ${role}`,
  )
  const pooled = new URL(poolerUrl)
  pooled.username = role
  pooled.password = ''
  return {
    name: role,
    database: { kind: 'postgres', url: pooled.toString(), pooler: 'transaction', directUrl: url },
    env: { DATABASE_URL: pooled.toString(), DATABASE_POOLER: 'transaction', DATABASE_DIRECT_URL: url },
    drop: async () => {
      await adminQuery(url, `drop schema if exists ${role} cascade`)
      idlePoolerRoles.push(role)
    },
  }
}

/**
 * Roles (each named as its schema) of closed harnesses behind the pooler, for the next harness of
 * this test worker; .ci/pgbouncer-leg.sh drops them all (TEST_POOLER_ROLES names them) at its end.
 */
const idlePoolerRoles: string[] = []

async function adminQuery(url: string, query: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    await admin.query(query)
  } finally {
    await admin.end()
  }
}

async function loadMigratedPglite(): Promise<PGlite> {
  const dumpFile = inject('pgliteDump')
  if (!dumpFile) {
    return PGlite.create() // no pglite leg in the global setup: the harness migrates this one
  }
  pgliteDump ??= new Blob([readFileSync(dumpFile)])
  const pglite = await PGlite.create({ loadDataDir: pgliteDump })
  migratedSchema ??= await schemaOf(pglite)
  return pglite
}

/** The schema of an instance loaded from the dump: one whose schema a test changed is not reused. */
let migratedSchema: string | undefined

/** Tables, columns, indexes and constraints of the current schema, as one text. */
async function schemaOf(pglite: PGlite): Promise<string> {
  const { rows } = await pglite.query<{ schema: string | null }>(`
    select string_agg(item, ';' order by item) as schema from (
      select table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
        || ' ' || coalesce(column_default, '') as item
      from information_schema.columns where table_schema = current_schema()
      union all select indexdef from pg_indexes where schemaname = current_schema()
      union all select conname || ' ' || pg_get_constraintdef(oid) from pg_constraint
        where connamespace = current_schema()::regnamespace
    ) as parts`)
  return rows[0]?.schema ?? ''
}

const SEEDED_ROWS: Record<string, string> = {
  event_sequence: 'update event_sequence set last_position = 0',
  webhook_dispatch: "update webhook_dispatch set tx_id = 0, event_id = ''",
}

/**
 * Empties every table (Kysely's migration records stay) and keeps the instance for the next harness;
 * closes it if its schema changed, or if that fails.
 */
async function giveBack(pglite: PGlite): Promise<void> {
  try {
    // A test that dropped a table on purpose (http-conventions) must not hand on a broken database.
    if (migratedSchema === undefined || (await schemaOf(pglite)) !== migratedSchema) {
      await pglite.close()
      return
    }
    const { rows } = await pglite.query<{ name: string }>(
      "select tablename as name from pg_tables where schemaname = current_schema() and tablename not like 'kysely\\_%'",
    )
    // The one-row tables the migrations seed keep their row, set back to where a new database starts.
    const emptied = rows.filter((row) => !Object.hasOwn(SEEDED_ROWS, row.name))
    if (emptied.length > 0) {
      await pglite.exec(`truncate ${emptied.map((row) => `"${row.name}"`).join(', ')}`)
    }
    await pglite.exec(Object.values(SEEDED_ROWS).join('; '))
    if (idlePglites.length >= IDLE_PGLITES_MAX) {
      await pglite.close()
      return
    }
    idlePglites.push(pglite)
  } catch {
    await pglite.close()
  }
}
