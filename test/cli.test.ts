// The command line through runCli: accounts and keys (text and --json), migrate, usage errors
// that exit 2 and write nothing, and keys that work (and stop working) against the HTTP API on
// the same SQLite file.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { buildApp } from '../src/app.js'
import { runCli } from '../src/cli/cli.js'
import { loadConfig } from '../src/config.js'
import { closeDeps, createDeps, type Deps } from '../src/deps.js'
import { manualClock } from '../src/lib/clock.js'
import { MIGRATIONS, TABLES } from './schema-expectations.js'

const ACCOUNT_ID = /^acct_[0-9A-HJKMNP-TV-Z]{26}$/
const KEY_ID = /^key_[0-9A-HJKMNP-TV-Z]{26}$/
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const SECRET = /^service_live_[A-Za-z0-9]{32}$/
const ANY_FULL_KEY = /service_live_[A-Za-z0-9]{32}/
const APP_SECRET = 'cli-test-secret-0123456789abcdef0123456789'

interface Run {
  code: number
  out: string[]
  err: string[]
}

/** Runs one command and collects what it prints. */
async function cli(argv: string[], env: Record<string, string>): Promise<Run> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, env, { out: (text) => out.push(text), err: (text) => err.push(text) })
  return { code, out, err }
}

/** Runs a command that must succeed with --json and returns its one JSON object. */
async function cliJson(argv: string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  const run = await cli([...argv, '--json'], env)
  expect(run, `contacts-api ${argv.join(' ')}`).toEqual({ code: 0, out: [expect.any(String)], err: [] })
  const text = run.out[0] ?? ''
  expect(text).not.toContain('\n')
  return JSON.parse(text)
}

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) {
    rmSync(dir, { recursive: true, force: true })
  }
})

/** A database file (not created yet) in a fresh temp dir, and the environment pointing at it. */
function freshDatabase(extra: Record<string, string> = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-cli-'))
  dirs.push(dir)
  const file = path.join(dir, 'contacts.sqlite')
  return { dir, file, env: { DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: 'silent', ...extra } }
}

interface Counts {
  accounts: number
  api_keys: number
  revoked: number
  tables: number
}

/** Row counts read straight from the file, through a separate read-only connection. */
function countRows(file: string): Counts {
  const db = new SQLite(file, { readonly: true, fileMustExist: true })
  try {
    const count = (query: string) => (db.prepare(query).all() as Array<{ n: number }>)[0]?.n
    return {
      // Accounts, not their test environments (src/accounts/tenant.ts).
      accounts: count("select count(*) as n from accounts where id not like '%\\_test' escape '\\'") ?? -1,
      api_keys: count('select count(*) as n from api_keys') ?? -1,
      revoked: count('select count(*) as n from api_keys where revoked_at is not null') ?? -1,
      tables: count("select count(*) as n from sqlite_master where type = 'table'") ?? -1,
    }
  } finally {
    db.close()
  }
}

function tableNames(file: string): string[] {
  const db = new SQLite(file, { readonly: true, fileMustExist: true })
  try {
    return (
      db.prepare("select name from sqlite_master where type = 'table' order by name").all() as Array<{ name: string }>
    ).map((row) => row.name)
  } finally {
    db.close()
  }
}

/** The bytes of the database and of its WAL (when one is left), as one searchable string. */
function fileContents(file: string): string {
  return [file, `${file}-wal`]
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f).toString('latin1'))
    .join('\n')
}

interface CreatedAccount {
  account: { id: string; name: string; created_at: string }
  api_key: { id: string; secret: string; key: string }
}

async function createAccount(env: Record<string, string>, name = 'Acme'): Promise<CreatedAccount> {
  return (await cliJson(['accounts', 'create', '--name', name], env)) as unknown as CreatedAccount
}

describe('contacts-api accounts create', () => {
  it('--json prints exactly one JSON object with the account and its first key', async () => {
    const { file, env } = freshDatabase()
    const run = await cli(['accounts', 'create', '--name', 'Acme', '--json'], env)
    expect(run.code).toBe(0)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    const body = JSON.parse(run.out[0] ?? '')
    expect(body).toEqual({
      account: { id: expect.stringMatching(ACCOUNT_ID), name: 'Acme', created_at: expect.stringMatching(TIMESTAMP) },
      api_key: {
        id: expect.stringMatching(KEY_ID),
        account_id: body.account.id,
        livemode: true,
        name: 'Default',
        key: `service_live_…${body.api_key.secret.slice(-4)}`,
        scopes: ['read', 'write'],
        created_at: body.account.created_at,
        expires_at: null,
        last_used_at: null,
        secret: expect.stringMatching(SECRET),
      },
    })
    expect(countRows(file)).toMatchObject({ accounts: 1, api_keys: 1, revoked: 0 })
  })

  it('text form shows the secret on its own line once, with a curl hint on API_URL', async () => {
    const { env } = freshDatabase({ API_URL: 'https://api.example.test/' })
    const run = await cli(['accounts', 'create', '--name', '  Acme Corp  '], env)
    expect(run.code).toBe(0)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    const lines = (run.out[0] ?? '').split('\n')
    const secret = lines.find((line) => /^ {2}\S+$/.test(line))?.trim() ?? ''
    expect(secret).toMatch(SECRET)
    expect(lines).toEqual([
      expect.stringMatching(/^Created account acct_[0-9A-HJKMNP-TV-Z]{26} \(Acme Corp\)\.$/),
      expect.stringMatching(/^API key key_[0-9A-HJKMNP-TV-Z]{26}, shown only this once\. /),
      `  ${secret}`,
      `Try it:  curl -H "Authorization: Bearer ${secret}" https://api.example.test/api/v1/me`,
    ])
    expect(lines.filter((line) => line === `  ${secret}`)).toHaveLength(1)
  })

  it('uses KEY_PREFIX in the secret and in the redacted key', async () => {
    const { env } = freshDatabase({ KEY_PREFIX: 'acme' })
    const created = await createAccount(env)
    expect(created.api_key.secret).toMatch(/^acme_live_[A-Za-z0-9]{32}$/)
    expect(created.api_key.key).toBe(`acme_live_…${created.api_key.secret.slice(-4)}`)
  })
})

describe('contacts-api keys', () => {
  const db = freshDatabase()
  let acme: CreatedAccount
  beforeAll(async () => {
    acme = await createAccount(db.env)
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('keys create --name --read-only --expires-at prints the new key once', async () => {
    const body = await cliJson(
      [
        'keys',
        'create',
        '--account',
        acme.account.id,
        '--name',
        'CI reader',
        '--read-only',
        '--expires-at',
        '2999-01-02T03:04:05Z',
      ],
      db.env,
    )
    const key = body.api_key as { secret: string }
    expect(body).toEqual({
      api_key: {
        id: expect.stringMatching(KEY_ID),
        account_id: acme.account.id,
        livemode: true,
        name: 'CI reader',
        key: `service_live_…${key.secret.slice(-4)}`,
        scopes: ['read'],
        created_at: expect.stringMatching(TIMESTAMP),
        expires_at: '2999-01-02T03:04:05.000Z',
        last_used_at: null,
        secret: expect.stringMatching(SECRET),
      },
    })
    expect(key.secret).not.toBe(acme.api_key.secret)
  })

  it('keys create takes a --name of up to 100 characters', async () => {
    const name = 'n'.repeat(100)
    const body = await cliJson(['keys', 'create', '--account', acme.account.id, '--name', ` ${name} `], db.env)
    expect(body.api_key).toMatchObject({ name })
  })

  it('keys create --test makes a test-mode key of the same account, and says so', async () => {
    const body = await cliJson(['keys', 'create', '--account', acme.account.id, '--test'], db.env)
    const key = body.api_key as { secret: string }
    expect(key.secret).toMatch(/^service_test_[A-Za-z0-9]{32}$/)
    expect(body.api_key).toMatchObject({
      account_id: acme.account.id,
      livemode: false,
      key: `service_test_…${key.secret.slice(-4)}`,
    })
  })

  it('keys create defaults to "Default", read+write, no expiry; text form shows the secret', async () => {
    const run = await cli(['keys', 'create', '--account', acme.account.id], db.env)
    expect(run.code).toBe(0)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    expect(run.out[0]).toMatch(
      /^API key key_[0-9A-HJKMNP-TV-Z]{26} \(Default, read\+write\), shown only this once:\n {2}service_live_[A-Za-z0-9]{32}$/,
    )
  })

  it("keys create and keys revoke are written to the account's audit log, as the command line", async () => {
    const { file, env } = freshDatabase()
    const owner = await createAccount(env, 'Owner')
    const key = (await cliJson(['keys', 'create', '--account', owner.account.id, '--name', 'Audited'], env))
      .api_key as {
      id: string
    }
    await cliJson(['keys', 'revoke', key.id], env)
    await cliJson(['keys', 'revoke', key.id], env) // already revoked: no second entry
    const db = new SQLite(file, { readonly: true })
    try {
      const rows = db.prepare('select action, target_id, actor_user_id, ip, detail from audit_log order by id').all()
      expect(rows).toEqual([
        {
          // The account's first key, issued by `accounts create`.
          action: 'api_key.created',
          target_id: owner.api_key.id,
          actor_user_id: null,
          ip: null,
          detail: JSON.stringify({ name: 'Default', scopes: ['read', 'write'], expires_at: null }),
        },
        {
          action: 'api_key.created',
          target_id: key.id,
          actor_user_id: null,
          ip: null,
          detail: JSON.stringify({ name: 'Audited', scopes: ['read', 'write'], expires_at: null }),
        },
        { action: 'api_key.revoked', target_id: key.id, actor_user_id: null, ip: null, detail: '{"name":"Audited"}' },
      ])
    } finally {
      db.close()
    }
  })

  it('keys revoke with REDIS_URL set but Redis down: the key is revoked, and the lost push is said plainly', async () => {
    const { file, env } = freshDatabase()
    const owner = await createAccount(env, 'Owner')
    const key = (await cliJson(['keys', 'create', '--account', owner.account.id], env)).api_key as { id: string }
    // Port 1: nothing listens there, so the connection is refused at once.
    const run = await cli(['keys', 'revoke', key.id], { ...env, REDIS_URL: 'redis://127.0.0.1:1' })
    expect(run).toEqual({
      code: 0,
      out: [`Revoked ${key.id} (Default). The push to running servers failed: they refuse it within 5 seconds.`],
      err: [],
    })
    expect(countRows(file)).toMatchObject({ api_keys: 2, revoked: 1 })
  }, 15_000)

  it('keys list shows redacted keys with their status, never a secret', async () => {
    const { file, env } = freshDatabase()
    const owner = await createAccount(env, 'Owner')
    const other = await createAccount(env, 'Other')
    const soon = new Date(Date.now() + 60_000).toISOString()
    const expiring = (await cliJson(['keys', 'create', '--account', owner.account.id, '--expires-at', soon], env))
      .api_key as { id: string; secret: string }
    const revoked = (await cliJson(['keys', 'create', '--account', owner.account.id, '--name', 'Old'], env))
      .api_key as { id: string; secret: string }
    await cliJson(['keys', 'revoke', revoked.id], env)

    // Two minutes later the expiring key has expired (only Date is faked: no timers, no sleeps).
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.now() + 120_000)
    const run = await cli(['keys', 'list', '--account', owner.account.id, '--json'], env)
    vi.useRealTimers()

    expect(run.code).toBe(0)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    const text = run.out[0] ?? ''
    expect(text).not.toMatch(ANY_FULL_KEY)
    for (const secret of [owner.api_key.secret, expiring.secret, revoked.secret]) {
      expect(text).not.toContain(secret)
    }
    const redacted = (secret: string) => `service_live_…${secret.slice(-4)}`
    const common = {
      account_id: owner.account.id,
      livemode: true,
      created_at: expect.stringMatching(TIMESTAMP),
      last_used_at: null,
    }
    expect(JSON.parse(text)).toEqual({
      api_keys: [
        {
          ...common,
          id: owner.api_key.id,
          name: 'Default',
          key: redacted(owner.api_key.secret),
          scopes: ['read', 'write'],
          expires_at: null,
          status: 'active',
        },
        {
          ...common,
          id: expiring.id,
          name: 'Default',
          key: redacted(expiring.secret),
          scopes: ['read', 'write'],
          expires_at: soon,
          status: 'expired',
        },
        {
          ...common,
          id: revoked.id,
          name: 'Old',
          key: redacted(revoked.secret),
          scopes: ['read', 'write'],
          expires_at: null,
          status: 'revoked',
        },
      ],
    })
    expect(JSON.stringify(JSON.parse(text))).not.toContain(other.account.id)

    const plain = await cli(['keys', 'list', '--account', owner.account.id], env)
    expect(plain.code).toBe(0)
    expect(plain.out[0]).not.toMatch(ANY_FULL_KEY)
    const lines = (plain.out[0] ?? '').split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[0]).toBe(`${owner.api_key.id}  ${redacted(owner.api_key.secret)}  active   read+write  Default`)
    expect(lines[2]).toBe(`${revoked.id}  ${redacted(revoked.secret)}  revoked  read+write  Old`)
    expect(countRows(file)).toMatchObject({ accounts: 2, api_keys: 4, revoked: 1 })
  })

  it('keys list of an account without keys says so', async () => {
    const { file, env } = freshDatabase()
    const lonely = await createAccount(env, 'Lonely')
    const sql = new SQLite(file)
    sql.prepare('delete from api_keys').run()
    sql.close()
    expect(await cliJson(['keys', 'list', '--account', lonely.account.id], env)).toEqual({ api_keys: [] })
    expect(await cli(['keys', 'list', '--account', lonely.account.id], env)).toEqual({
      code: 0,
      out: ['No keys.'],
      err: [],
    })
  })

  it('keys revoke marks the key revoked and is idempotent', async () => {
    const key = (await cliJson(['keys', 'create', '--account', acme.account.id, '--name', 'Temp'], db.env)).api_key as {
      id: string
      secret: string
    }
    const before = countRows(db.file).revoked
    const body = await cliJson(['keys', 'revoke', key.id], db.env)
    expect(body).toEqual({
      api_key: {
        id: key.id,
        account_id: acme.account.id,
        livemode: true,
        name: 'Temp',
        key: `service_live_…${key.secret.slice(-4)}`,
        scopes: ['read', 'write'],
        created_at: expect.stringMatching(TIMESTAMP),
        expires_at: null,
        last_used_at: null,
        status: 'revoked',
      },
    })
    expect(JSON.stringify(body)).not.toContain(key.secret)
    expect(countRows(db.file).revoked).toBe(before + 1)

    const again = await cli(['keys', 'revoke', key.id], db.env)
    expect(again).toEqual({
      code: 0,
      out: [`Revoked ${key.id} (Temp). Running servers refuse it within 1 second.`],
      err: [],
    })
    expect(countRows(db.file).revoked).toBe(before + 1)
  })
})

describe('keys from the CLI against the HTTP API on the same file', () => {
  const db = freshDatabase()
  const clock = manualClock(new Date())
  let deps: Deps
  let app: FastifyInstance
  let acme: CreatedAccount
  const secrets: string[] = []

  beforeAll(async () => {
    acme = await createAccount(db.env)
    secrets.push(acme.api_key.secret)
    const config = loadConfig({ DATABASE_URL: `sqlite:${db.file}`, SECRET: APP_SECRET, LOG_LEVEL: 'silent' })
    deps = createDeps(config, { clock })
    app = await buildApp(deps, { logger: false })
    await app.ready()
  })
  afterAll(async () => {
    await app?.close()
    if (deps) {
      await closeDeps(deps)
    }
  })

  const me = (secret: string) =>
    app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${secret}` } })

  const expectInvalidKey = (res: Awaited<ReturnType<typeof me>>) => {
    expect(res.statusCode).toBe(401)
    expect(res.headers['www-authenticate']).toBe('Bearer realm="api"')
    expect(res.json()).toMatchObject({ status: 401, code: 'invalid_api_key', title: 'Invalid API key' })
  }

  it('the key printed by accounts create authenticates GET /api/v1/me', async () => {
    const res = await me(acme.api_key.secret)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({
      object: 'account',
      id: acme.account.id,
      name: 'Acme',
      api_key: { id: acme.api_key.id, name: 'Default', scopes: ['read', 'write'], expires_at: null },
    })
    expect(res.body).not.toContain(acme.api_key.secret)
  })

  it('a read-only key from keys create authenticates with the read scope only', async () => {
    const key = (
      await cliJson(['keys', 'create', '--account', acme.account.id, '--name', 'Reader', '--read-only'], db.env)
    ).api_key as { id: string; secret: string }
    secrets.push(key.secret)
    const res = await me(key.secret)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({
      id: acme.account.id,
      api_key: { id: key.id, name: 'Reader', scopes: ['read'], expires_at: null },
    })
  })

  it('after keys revoke the key is refused within 1 s, other keys keep working', async () => {
    const key = (await cliJson(['keys', 'create', '--account', acme.account.id, '--name', 'Doomed'], db.env))
      .api_key as { id: string; secret: string }
    secrets.push(key.secret)
    expect((await me(key.secret)).statusCode).toBe(200)

    await cliJson(['keys', 'revoke', key.id], db.env)
    clock.advance(1001)
    expectInvalidKey(await me(key.secret))
    expect((await me(acme.api_key.secret)).statusCode).toBe(200)
  })

  it('a key with --expires-at works until then and is refused after', async () => {
    const expiresAt = new Date(clock.now().getTime() + 3_600_000).toISOString()
    const key = (await cliJson(['keys', 'create', '--account', acme.account.id, '--expires-at', expiresAt], db.env))
      .api_key as { id: string; secret: string }
    secrets.push(key.secret)
    const res = await me(key.secret)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ api_key: { id: key.id, expires_at: expiresAt } })

    clock.set(new Date(expiresAt))
    expectInvalidKey(await me(key.secret))
    expect((await me(acme.api_key.secret)).statusCode).toBe(200)
  })

  it('the database file and its WAL never contain a full key', async () => {
    await deps.keyVerifier.flush()
    expect(secrets).toHaveLength(4)
    // While the server holds the file open (its WAL may still hold recent pages).
    const live = fileContents(db.file)
    expect(live.length).toBeGreaterThan(0)
    expect(live).not.toMatch(ANY_FULL_KEY)
    for (const secret of secrets) {
      expect(live).not.toContain(secret)
      expect(live).not.toContain(secret.slice('service_live_'.length))
    }
    // The key ids are there, so the search does look at the rows.
    expect(live).toContain(acme.api_key.id)
  })
})

describe('contacts-api usage errors exit 2 and write nothing', () => {
  const db = freshDatabase()
  let acme: CreatedAccount
  beforeAll(async () => {
    acme = await createAccount(db.env)
  })

  const UNKNOWN_ACCOUNT = 'acct_01KAAAAAAAAAAAAAAAAAAAAAAA'
  const UNKNOWN_KEY = 'key_01KAAAAAAAAAAAAAAAAAAAAAAA'
  const cases: Array<[string, (ids: { account: string; key: string }) => string[], RegExp]> = [
    ['an unknown command', () => ['frobnicate'], /unknown command "frobnicate"/],
    ['an unknown subcommand', () => ['accounts', 'delete', '--name', 'X'], /unknown command "accounts delete"/],
    ['an unknown flag', () => ['accounts', 'create', '--name', 'X', '--colour', 'red'], /'--colour'/],
    ['an unknown short flag', () => ['accounts', 'create', '--name', 'X', '-x'], /'-x'/],
    ['missing --name', () => ['accounts', 'create'], /--name needs a value/],
    ['a blank --name', () => ['accounts', 'create', '--name', '   '], /--name needs a value/],
    ['--name without its value', () => ['accounts', 'create', '--name'], /--name/],
    ['a --name over 256 characters', () => ['accounts', 'create', '--name', 'x'.repeat(257)], /--name needs a value/],
    ['a NUL in --name', () => ['accounts', 'create', '--name', 'A\u0000B'], /--name needs a value/],
    [
      'an extra positional argument',
      () => ['accounts', 'create', 'Acme', '--name', 'Acme'],
      /unexpected argument "Acme"/,
    ],
    ['keys create without --account', () => ['keys', 'create'], /--account needs a value/],
    ['keys create with an unknown account', () => ['keys', 'create', '--account', UNKNOWN_ACCOUNT], /no account acct_/],
    [
      'keys create with --expires-at in the past',
      ({ account }) => ['keys', 'create', '--account', account, '--expires-at', '2020-01-01T00:00:00Z'],
      /--expires-at must be in the future/,
    ],
    [
      'keys create with a garbage --expires-at',
      ({ account }) => ['keys', 'create', '--account', account, '--expires-at', 'tomorrow'],
      /--expires-at must be an RFC 3339 time with an offset/,
    ],
    [
      'keys create with an impossible --expires-at',
      ({ account }) => ['keys', 'create', '--account', account, '--expires-at', '2999-13-45T00:00:00Z'],
      /--expires-at must be an RFC 3339 time with an offset/,
    ],
    [
      'keys create with February 30',
      ({ account }) => ['keys', 'create', '--account', account, '--expires-at', '2999-02-30T00:00:00Z'],
      /--expires-at must be an RFC 3339 time with an offset/,
    ],
    [
      'keys create with no offset (would be read in local time)',
      ({ account }) => ['keys', 'create', '--account', account, '--expires-at', '2999-01-01T00:00:00'],
      /--expires-at must be an RFC 3339 time with an offset/,
    ],
    [
      'a flag the command does not take',
      () => ['accounts', 'create', '--name', 'X', '--expires-at', '2999-01-01T00:00:00Z'],
      /--expires-at does not apply to "accounts create"/,
    ],
    [
      '--account on keys revoke',
      ({ key, account }) => ['keys', 'revoke', key, '--account', account],
      /--account does not apply/,
    ],
    ['no command at all', () => [], /missing command; see contacts-api --help/],
    ['migrate down without --yes', () => ['migrate', 'down'], /add --yes to confirm/],
    [
      'keys create with a --name over the key-name limit (100 characters, as in the web app)',
      ({ account }) => ['keys', 'create', '--account', account, '--name', 'x'.repeat(101)],
      /--name needs a value of 1-100 characters/,
    ],
    [
      'keys create with a blank --name',
      ({ account }) => ['keys', 'create', '--account', account, '--name', ''],
      /--name needs a value/,
    ],
    [
      'keys create with an extra argument',
      ({ account }) => ['keys', 'create', 'now', '--account', account],
      /unexpected argument "now"/,
    ],
    ['keys list with an unknown account', () => ['keys', 'list', '--account', UNKNOWN_ACCOUNT], /no account acct_/],
    ['keys revoke without an id', () => ['keys', 'revoke'], /keys revoke needs a KEY_ID/],
    ['keys revoke with an unknown id', () => ['keys', 'revoke', UNKNOWN_KEY], /no API key key_/],
    ['keys revoke with two ids', ({ key }) => ['keys', 'revoke', key, UNKNOWN_KEY], /unexpected argument "key_/],
    ['migrate with an unknown direction', () => ['migrate', 'sideways'], /migrate takes up, down or status/],
    ['migrate down with an extra argument', () => ['migrate', 'down', 'twice', '--yes'], /unexpected argument "twice"/],
  ]

  it.each(cases)('%s', async (_label, argv, reason) => {
    const before = countRows(db.file)
    expect(before).toMatchObject({ accounts: 1, api_keys: 1, revoked: 0 })
    for (const json of [false, true]) {
      const run = await cli(
        [...argv({ account: acme.account.id, key: acme.api_key.id }), ...(json ? ['--json'] : [])],
        db.env,
      )
      expect(run.code).toBe(2)
      expect(run.out).toEqual([])
      expect(run.err).toHaveLength(1)
      expect(run.err[0]).toMatch(/^contacts-api: [^\n]+$/)
      expect(run.err[0]).toMatch(reason)
      expect(countRows(db.file)).toEqual(before)
    }
  })

  it('the account and its key are untouched by all of the above', async () => {
    const list = await cliJson(['keys', 'list', '--account', acme.account.id], db.env)
    expect(list).toEqual({
      api_keys: [expect.objectContaining({ id: acme.api_key.id, status: 'active', scopes: ['read', 'write'] })],
    })
  })

  it('--help prints the usage and exits 0', async () => {
    const run = await cli(['--help'], db.env)
    expect(run.code).toBe(0)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    expect(run.out[0]).toMatch(/^Usage: contacts-api <command>/)
  })
})

describe('contacts-api with a bad configuration', () => {
  it('a usage error on a new database path creates no file at all', async () => {
    const { dir, env } = freshDatabase()
    for (const argv of [
      ['frobnicate'],
      ['accounts', 'create'],
      ['keys', 'create', '--account', 'acct_x', '--expires-at', 'soon'],
    ]) {
      expect((await cli(argv, env)).code).toBe(2)
    }
    expect(existsSync(path.join(dir, 'contacts.sqlite'))).toBe(false)
    expect(existsSync(path.join(dir, 'secret'))).toBe(false)
  })

  it('refuses a secret file beside the database that others can read or write, saying how to fix it', async () => {
    const { dir, env } = freshDatabase()
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, 'secret')
    writeFileSync(file, 'chosen-by-someone-else-0123456789abcdef')
    chmodSync(file, 0o644)
    // Thrown out of the command (main.ts prints it and exits 1).
    await expect(cli(['migrate'], env)).rejects.toThrow(`chmod 600 ${file}`)
    // `serve` says it in one line, as for every other reason it cannot start.
    const served = await cli(['serve'], { ...env, PORT: '0' })
    expect(served.code).toBe(1)
    expect(served.err).toEqual([expect.stringMatching(/^contacts-api: cannot start: .*chmod 600 /)])
    chmodSync(file, 0o600)
    expect((await cli(['migrate'], env)).code).toBe(0)
  })

  it('a configuration error is one line listing every problem', async () => {
    const run = await cli(['migrate'], { DATABASE_URL: 'mysql://x', PORT: 'eighty', LOG_LEVEL: 'loud' })
    expect(run.code).toBe(2)
    expect(run.err).toHaveLength(1)
    expect(run.err[0]).not.toContain('\n')
    for (const name of ['DATABASE_URL', 'PORT', 'LOG_LEVEL']) {
      expect(run.err[0]).toContain(name)
    }
  })

  it('an invalid DATABASE_URL exits 2 naming DATABASE_URL, without its password', async () => {
    const { dir } = freshDatabase()
    for (const url of ['mysql://x', 'mysql://admin:hunter2@db.internal/contacts']) {
      const run = await cli(['accounts', 'create', '--name', 'Acme'], { DATABASE_URL: url, LOG_LEVEL: 'silent' })
      expect(run.code).toBe(2)
      expect(run.out).toEqual([])
      expect(run.err).toHaveLength(1)
      expect(run.err[0]).toMatch(/^contacts-api: /)
      expect(run.err[0]).toContain('DATABASE_URL must start with sqlite: or postgres://')
      expect(run.err[0]).not.toContain('hunter2')
    }
    const migrate = await cli(['migrate'], { DATABASE_URL: 'mysql://x', LOG_LEVEL: 'silent' })
    expect(migrate.code).toBe(2)
    expect(migrate.err.join('\n')).toContain('DATABASE_URL')
    expect(existsSync(path.join(dir, 'contacts.sqlite'))).toBe(false)
  })
})

describe('contacts-api migrate', () => {
  it('applies, reports status, rolls back and applies again', async () => {
    const { file, env } = freshDatabase()

    expect(await cliJson(['migrate'], env)).toEqual({ applied: MIGRATIONS })
    expect(tableNames(file)).toEqual(expect.arrayContaining(TABLES))
    expect(await cliJson(['migrate', 'up'], env)).toEqual({ applied: [] })
    expect(await cli(['migrate'], env)).toEqual({ code: 0, out: ['Nothing to do.'], err: [] })

    const status = await cliJson(['migrate', 'status'], env)
    expect(status).toEqual({
      migrations: MIGRATIONS.map((name) => ({ name, executed_at: expect.stringMatching(TIMESTAMP) })),
    })
    expect(await cli(['migrate', 'status'], env)).toEqual({
      code: 0,
      out: [MIGRATIONS.map((m) => `applied  ${m}`).join('\n')],
      err: [],
    })

    // Down rolls back one migration at a time, newest first.
    for (const name of [...MIGRATIONS].reverse()) {
      expect(await cliJson(['migrate', 'down', '--yes'], env)).toEqual({ rolled_back: [name] })
    }
    expect(tableNames(file).filter((name) => !name.startsWith('kysely_'))).toEqual([])
    expect(await cliJson(['migrate', 'status'], env)).toEqual({
      migrations: MIGRATIONS.map((name) => ({ name, executed_at: null })),
    })
    expect(await cli(['migrate', 'status'], env)).toEqual({
      code: 0,
      out: [MIGRATIONS.map((m) => `pending  ${m}`).join('\n')],
      err: [],
    })
    expect(await cliJson(['migrate', 'down', '--yes'], env)).toEqual({ rolled_back: [] })

    expect(await cli(['migrate'], env)).toEqual({ code: 0, out: [`Applied: ${MIGRATIONS.join(', ')}`], err: [] })
    expect(
      tableNames(file)
        .filter((name) => !name.startsWith('kysely_'))
        .sort(),
    ).toEqual(TABLES)
    // The schema works after the round trip.
    const acme = await createAccount(env)
    expect(acme.account.name).toBe('Acme')
    expect(countRows(file)).toMatchObject({ accounts: 1, api_keys: 1 })
  })

  it('accounts create on a fresh file migrates first', async () => {
    const { file, env } = freshDatabase()
    await createAccount(env)
    expect(await cliJson(['migrate', 'status'], env)).toEqual({
      migrations: MIGRATIONS.map((name) => ({ name, executed_at: expect.stringMatching(TIMESTAMP) })),
    })
    expect(countRows(file)).toMatchObject({ accounts: 1, api_keys: 1 })
  })
})

describe('the SQLite file never holds a full key', () => {
  it('after accounts create and keys create through the CLI', async () => {
    const { file, env } = freshDatabase()
    const secrets: string[] = []
    for (const name of ['Acme', 'Globex']) {
      const created = await createAccount(env, name)
      secrets.push(created.api_key.secret)
      for (const args of [[], ['--read-only'], ['--name', 'Expiring', '--expires-at', '2999-01-01T00:00:00Z']]) {
        const key = (await cliJson(['keys', 'create', '--account', created.account.id, ...args], env)).api_key as {
          secret: string
        }
        secrets.push(key.secret)
      }
    }
    expect(countRows(file)).toMatchObject({ accounts: 2, api_keys: 8 })
    const contents = fileContents(file)
    expect(contents).toContain('Globex')
    expect(contents).not.toMatch(ANY_FULL_KEY)
    for (const secret of secrets) {
      expect(contents).not.toContain(secret.slice('service_live_'.length))
    }
  })
})
