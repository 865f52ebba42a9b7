// Test harness: a fresh database of the given dialect, the app on it, and helpers that seed
// accounts with keys and send requests as them through app.inject.
import { randomBytes } from 'node:crypto'
import { PGlite } from '@electric-sql/pglite'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { Kysely } from 'kysely'
import pg from 'pg'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { FULL_SCOPES, type Scope } from '../src/api-keys/api-key.js'
import { issueApiKey } from '../src/api-keys/api-keys.store.js'
import { buildApp } from '../src/app.js'
import { type Config, loadConfig } from '../src/config.js'
import { type DatabaseHandle, openDatabase, wrap } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import type { Database } from '../src/db/schema.js'
import { closeDeps, createDeps, type Deps } from '../src/deps.js'
import type { Clock } from '../src/lib/clock.js'
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
  createKey(account: TestAccount, options?: { scopes?: Scope[]; expiresAt?: Date | null }): Promise<string>
  /** A request as this account (its key in Authorization), or unauthenticated with null. */
  inject(account: TestAccount | null, options: InjectOptions): Promise<LightMyRequestResponse>
  close(): Promise<void>
}

export const TEST_SECRET = 'test-secret-0123456789abcdef0123456789abcdef'

export async function createTestHarness(options: {
  dialect: TestDialect
  clock?: Clock
  env?: Record<string, string>
}): Promise<TestHarness> {
  // Rate limits are off unless a test turns them on: suites send hundreds of requests at once.
  const config = loadConfig({
    SECRET: TEST_SECRET,
    API_URL: 'http://api.test',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_SECOND: '0',
    AUTH_FAILURES_PER_MINUTE: '0',
    ...options.env,
  })
  const { database, dispose } = await openTestDatabase(options.dialect)
  await migrateToLatest(database)
  const deps = createDeps(config, { database, ...(options.clock ? { clock: options.clock } : {}) })
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
      const { secret } = await issueApiKey(database.db, account.id, {
        name: 'Extra',
        scopes: keyOptions.scopes ?? FULL_SCOPES,
        expiresAt: keyOptions.expiresAt ?? null,
        now: deps.clock.now(),
        prefix: config.keyPrefix,
      })
      return secret
    },
    inject(account, request) {
      const headers = { ...(account ? { authorization: `Bearer ${account.key}` } : {}), ...request.headers }
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

/** A config as the service would load it, for tests that need one without a harness. */
export const testConfig = (env: Record<string, string> = {}): Config =>
  loadConfig({ SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...env })

/** A fresh, empty database of the dialect. `dispose` removes what outlives it (the PostgreSQL schema); it does not close it. */
export async function openTestDatabase(
  dialect: TestDialect,
): Promise<{ database: DatabaseHandle; dispose(): Promise<void> }> {
  if (dialect === 'sqlite') {
    return {
      database: openDatabase({ kind: 'sqlite', path: ':memory:', synchronous: 'NORMAL' }),
      dispose: async () => {},
    }
  }
  if (dialect === 'pglite') {
    const pglite = await PGlite.create()
    return {
      database: wrap(new Kysely<Database>({ dialect: pgliteDialect(pglite) }), 'postgres'),
      dispose: async () => {},
    }
  }
  // The real server: a throwaway schema per harness inside TEST_DATABASE_URL's database.
  const url = process.env.TEST_DATABASE_URL
  if (!url) {
    throw new Error('TEST_DATABASE_URL is not set')
  }
  const schema = `test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`create schema ${schema}`)
  await admin.end()
  const scoped = new URL(url)
  scoped.searchParams.set('options', `-c search_path=${schema}`)
  return {
    database: openDatabase({ kind: 'postgres', url: scoped.toString() }),
    async dispose() {
      const cleanup = new pg.Client({ connectionString: url })
      await cleanup.connect()
      await cleanup.query(`drop schema ${schema} cascade`)
      await cleanup.end()
    },
  }
}
