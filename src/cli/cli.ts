// The contacts-api command line: serve, worker, migrate, accounts, keys, scan, listen, trigger, backup
// and restore. Exit 2 on bad arguments.
import { createAccountWithKey } from '../accounts/accounts.js'
import { ACCOUNT_NAME_MAX, findAccount } from '../accounts/accounts.store.js'
import { liveTenant, tenantById, tenantOf, testTenant } from '../accounts/tenant.js'
import { FULL_SCOPES, hashApiKey, READ_ONLY_SCOPES } from '../api-keys/api-key.js'
import { type ApiKey, findApiKeyById, findKeyByHash, keyState, listApiKeys } from '../api-keys/api-keys.store.js'
import {
  issueKey,
  KEY_NAME_MAX,
  type KeyLifecycleDeps,
  reportExposedKey,
  revokeKey,
} from '../api-keys/key-lifecycle.js'
import { type Config, ConfigError, loadConfig } from '../config.js'
import { POOLER_HINT } from '../db/database.js'
import { migrateDown, migrateToLatest, migrationStatus } from '../db/migrate.js'
import { closeDeps, createDeps, type Deps, StartError } from '../deps.js'
import { startServer } from '../server.js'
import { ID_ARGUMENT_MAX, noExtra, parseArguments, parseRfc3339, requireText, UsageError } from './arguments.js'
import { runBackup } from './backup.js'
import { cliCommandLine } from './command-line.js'
import { type CliIo, processIo } from './io.js'
import { runListen, runUntilInterrupted } from './listen.js'
import { runScan } from './scan.js'

const USAGE = `Usage: contacts-api <command> [options]

  serve [--api-only]                      migrate, then serve the API and the web app (npm start);
                                          --api-only: the API, /openapi.json and probes, no web app or /docs
  worker                                  migrate, then deliver webhooks only (/healthz, /metrics)
  migrate [up|down --yes|status]          apply (default), roll back the last, or list migrations
  accounts create --name NAME             create an account and its first API key
  keys create --account ID [--name NAME] [--read-only] [--expires-at RFC3339] [--test]
                                          --test: a service_test_ key, for the account's test mode
  keys list --account ID                  the keys of both modes
  keys revoke KEY_ID
  keys report-leak SECRET                 a key found in public: revoked (SECRET_SCANNING_ACTION=notify: flagged)
  scan [--prefix P] [PATH...]             report API keys in files, redacted; exit 1 if any (scan --help)
  listen --forward-to URL [--events T]    forward the account's events to a local URL, signed (listen --help)
  trigger EVENT_TYPE                      make sample test-mode data that fires the event
  backup --to FILE                        SQLite: a consistent copy while serving; PostgreSQL: the pg_dump command
  restore --from FILE [--force]           SQLite: replace the database (server stopped); PostgreSQL: pg_restore

  --json    print one JSON object instead of text
  Configuration comes from the environment (see README: DATABASE_URL, SECRET, ...).`

const OPTIONS = {
  json: { type: 'boolean' },
  name: { type: 'string' },
  account: { type: 'string' },
  'read-only': { type: 'boolean' },
  'expires-at': { type: 'string' },
  test: { type: 'boolean' },
  yes: { type: 'boolean' },
  'api-only': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

/** Runs one command; returns the exit code (a running `serve` resolves 0 and keeps the process alive). */
export async function runCli(argv: string[], env = process.env, io: CliIo = processIo): Promise<number> {
  // Before the configuration is loaded: scan needs no database and runs in other repositories' hooks.
  if (argv[0] === 'scan') {
    return runScan(argv.slice(1), env, io)
  }
  // Copies of the database file: no migration, no pool (restore must not open the target as a server).
  if (argv[0] === 'backup' || argv[0] === 'restore') {
    return runBackup(argv[0], argv.slice(1), env, io)
  }
  // Clients of a running API: no configuration, no database.
  if (argv[0] === 'listen' || argv[0] === 'trigger') {
    return runUntilInterrupted((stop) => runListen(argv[0] as 'listen' | 'trigger', argv.slice(1), env, io, stop))
  }
  let config: Config
  let command: Prepared
  let json: boolean
  try {
    const parsed = parse(argv)
    if (parsed.values.help) {
      io.out(USAGE)
      return 0
    }
    json = parsed.values.json === true
    // Everything about the arguments is checked before the database is opened: a usage error writes nothing.
    command = prepare(parsed.positionals, parsed.values)
    config = loadConfig(env)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`contacts-api: ${error.message}`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.err(`contacts-api: invalid configuration: ${error.problems.join('; ')}`)
      return 2
    }
    throw error
  }

  if (command === 'worker') {
    const server = await startOrSay(config, 'worker', io)
    if (!server) {
      return 1
    }
    io.err(`Contacts API webhook worker running (health and metrics on ${server.address})`)
    return 0
  }
  if (command === 'serve' || command === 'serve-api-only') {
    const apiOnly = command === 'serve-api-only'
    const server = await startOrSay(config, apiOnly ? 'api-only' : 'serve', io)
    if (!server) {
      return 1
    }
    io.err(
      apiOnly
        ? `Contacts API listening on ${server.address} (Node ${process.versions.node}; API only, at ${server.address}/api/v1; no web app, no /docs)`
        : `Contacts API listening on ${server.address} (Node ${process.versions.node}; API at ${server.address}/api/v1, docs at ${server.address}/docs)`,
    )
    if (!server.hasAccounts) {
      io.err(`No account yet. Create one and its first API key:  ${cliCommandLine(env, 'accounts create --name Acme')}`)
    }
    return 0
  }

  const deps = createDeps(config)
  try {
    const result = await command(deps)
    io.out(json ? JSON.stringify(result.json) : result.text)
    return 0
  } catch (error) {
    io.err(`contacts-api: ${error instanceof Error ? error.message : String(error)}`)
    return error instanceof UsageError ? 2 : 1
  } finally {
    await closeDeps(deps)
  }
}

/** Starts the server; a failure the operator can fix (StartError) is one line on stderr, not a stack. */
async function startOrSay(config: Config, role: 'serve' | 'api-only' | 'worker', io: CliIo) {
  try {
    return await startServer(config, role)
  } catch (error) {
    if (error instanceof StartError || (error instanceof Error && error.message.includes(POOLER_HINT))) {
      io.err(`contacts-api: cannot start: ${error.message}`)
      return undefined
    }
    throw error
  }
}

const parse = (argv: string[]) => parseArguments(argv, OPTIONS)

type Values = ReturnType<typeof parse>['values']
type Flag = Exclude<keyof Values, 'json' | 'help'>
type Result = { text: string; json: unknown }
type Prepared = 'serve' | 'serve-api-only' | 'worker' | ((deps: Deps) => Promise<Result>)

interface CommandSpec {
  flags: Flag[]
  /** Checks the arguments without touching the database; returns the work to run. */
  prepare(values: Values, args: string[]): Prepared
}

function prepare(positionals: string[], values: Values): Prepared {
  const [first, second, ...rest] = positionals
  if (first === undefined) {
    throw new UsageError('missing command; see contacts-api --help')
  }
  const twoWords = second === undefined ? undefined : COMMANDS[`${first} ${second}`]
  const spec = twoWords ?? COMMANDS[first]
  if (!spec) {
    throw new UsageError(`unknown command "${[first, second].filter(Boolean).join(' ')}"; see contacts-api --help`)
  }
  for (const flag of Object.keys(values) as Array<keyof Values>) {
    if (flag !== 'json' && flag !== 'help' && !spec.flags.includes(flag)) {
      throw new UsageError(`--${flag} does not apply to "${twoWords ? `${first} ${second}` : first}"`)
    }
  }
  const args = twoWords ? rest : positionals.slice(1)
  return spec.prepare(values, args)
}

const COMMANDS: Record<string, CommandSpec> = {
  serve: {
    flags: ['api-only'],
    prepare: (values, args) => {
      noExtra(args)
      return values['api-only'] === true ? 'serve-api-only' : 'serve'
    },
  },

  worker: {
    flags: [],
    prepare: (_values, args) => {
      noExtra(args)
      return 'worker'
    },
  },

  migrate: {
    flags: ['yes'],
    prepare: (values, args) => {
      const [direction = 'up', ...extra] = args
      noExtra(extra)
      if (direction === 'status') {
        return async (deps) => {
          const status = await migrationStatus(deps.database)
          return {
            text: status.map((m) => `${m.executed_at ? 'applied' : 'pending'}  ${m.name}`).join('\n'),
            json: { migrations: status },
          }
        }
      }
      if (direction === 'up') {
        return async (deps) => {
          const names = await migrateToLatest(deps.database)
          return { text: names.length ? `Applied: ${names.join(', ')}` : 'Nothing to do.', json: { applied: names } }
        }
      }
      if (direction === 'down') {
        if (!values.yes) {
          throw new UsageError('migrate down drops tables and their data; add --yes to confirm')
        }
        return async (deps) => {
          const names = await migrateDown(deps.database)
          return {
            text: names.length ? `Rolled back: ${names.join(', ')}` : 'Nothing to do.',
            json: { rolled_back: names },
          }
        }
      }
      throw new UsageError(`migrate takes up, down or status (got "${direction}")`)
    },
  },

  'accounts create': {
    flags: ['name'],
    prepare: (values, args) => {
      noExtra(args)
      const name = requireText(values.name, '--name', ACCOUNT_NAME_MAX)
      return async (deps) => {
        await migrateToLatest(deps.database)
        const { account, apiKey, secret } = await createAccountWithKey(deps.database.db, {
          name,
          now: deps.clock.now(),
          keyPrefix: deps.config.keyPrefix,
        })
        return {
          text: [
            `Created account ${account.id} (${account.name}).`,
            `API key ${apiKey.id}, shown only this once. Store it in a secret manager, never in code or git:`,
            `  ${secret}`,
            `Try it:  curl -H "Authorization: Bearer ${secret}" ${deps.config.apiUrl}/api/v1/me`,
          ].join('\n'),
          json: {
            account: { id: account.id, name: account.name, created_at: account.created_at },
            api_key: { ...publicKey(apiKey), secret },
          },
        }
      }
    },
  },

  'keys create': {
    flags: ['account', 'name', 'read-only', 'expires-at', 'test'],
    prepare: (values, args) => {
      noExtra(args)
      const accountId = requireText(values.account, '--account', ID_ARGUMENT_MAX)
      const name = values.name === undefined ? 'Default' : requireText(values.name, '--name', KEY_NAME_MAX)
      const scopes = values['read-only'] ? READ_ONLY_SCOPES : FULL_SCOPES
      const expiresAt = values['expires-at'] === undefined ? null : parseRfc3339(values['expires-at'], '--expires-at')
      return async (deps) => {
        await migrateToLatest(deps.database)
        await requireAccount(deps, accountId)
        const now = deps.clock.now()
        if (expiresAt && expiresAt <= now) {
          throw new UsageError('--expires-at must be in the future')
        }
        const tenant = tenantOf(accountId, values.test !== true)
        const { apiKey, secret } = await issueKey(deps, tenant.id, { name, scopes, expiresAt }, COMMAND_LINE, now)
        return {
          text: `API key ${apiKey.id} (${apiKey.name}, ${apiKey.scopes.join('+')}), shown only this once:\n  ${secret}`,
          json: { api_key: { ...publicKey(apiKey), secret } },
        }
      }
    },
  },

  'keys list': {
    flags: ['account'],
    prepare: (values, args) => {
      noExtra(args)
      const accountId = requireText(values.account, '--account', ID_ARGUMENT_MAX)
      return async (deps) => {
        await migrateToLatest(deps.database)
        await requireAccount(deps, accountId)
        const now = deps.clock.now()
        const modes = [liveTenant(accountId), testTenant(accountId)]
        const lists = await Promise.all(modes.map((t) => listApiKeys(deps.database.db, t.id, deps.config.keyPrefix)))
        const keys = lists.flat().map((k) => ({ ...publicKey(k), status: keyState(k, now) }))
        return {
          text: keys.length
            ? keys
                .map((k) => `${k.id}  ${k.key}  ${k.status.padEnd(7)}  ${k.scopes.join('+').padEnd(10)}  ${k.name}`)
                .join('\n')
            : 'No keys.',
          json: { api_keys: keys },
        }
      }
    },
  },

  'keys revoke': {
    flags: [],
    prepare: (_values, args) => {
      const [keyId, ...extra] = args
      noExtra(extra)
      if (!keyId) {
        throw new UsageError('keys revoke needs a KEY_ID')
      }
      return async (deps) => {
        await migrateToLatest(deps.database)
        const found = await findApiKeyById(deps.database.db, keyId, deps.config.keyPrefix)
        if (!found) {
          throw new UsageError(`no API key ${keyId}`)
        }
        const key = found.apiKey
        const { pushed } = await revokeKey(pushingFromCli(deps), found, COMMAND_LINE, deps.clock.now())
        return {
          text: pushed
            ? `Revoked ${key.id} (${key.name}). Running servers refuse it within 1 second.`
            : `Revoked ${key.id} (${key.name}). The push to running servers failed: they refuse it within 5 seconds.`,
          json: { api_key: { ...publicKey(key), status: 'revoked' } },
        }
      }
    },
  },
  'keys report-leak': {
    flags: [],
    prepare: (_values, args) => {
      const [secret, ...extra] = args
      noExtra(extra)
      if (!secret) {
        throw new UsageError('keys report-leak needs the leaked key itself')
      }
      return async (deps) => {
        await migrateToLatest(deps.database)
        const keyHash = hashApiKey(secret)
        const found = await findKeyByHash(deps.database.db, keyHash, deps.config.keyPrefix)
        if (!found) {
          // Never printed back: a leaked key in a terminal's scrollback is one more copy.
          throw new UsageError('not an API key of this deployment')
        }
        const key = found.key
        const action = deps.config.secretScanning.action
        const exposure = { url: '', source: 'operator' }
        await reportExposedKey(pushingFromCli(deps), { apiKey: key, keyHash }, exposure, action, deps.clock.now())
        return {
          text: `${action === 'revoke' ? 'Revoked' : 'Flagged'} ${key.id} (${key.name}) of ${found.account.id}; its account's API & Webhooks page says so.`,
          json: {
            api_key: { ...publicKey(key), status: action === 'revoke' ? 'revoked' : keyState(key, deps.clock.now()) },
          },
        }
      }
    },
  },
}

/** Key changes from the command line are audited as made by no one person (the operator). */
const COMMAND_LINE = null

/** The command line connects to Redis (or NOTIFY) only to push a revocation; a failure is a lost push. */
function pushingFromCli(deps: Deps): KeyLifecycleDeps {
  const publish = async (keyHash: string) =>
    !deps.keyRevocations.shared ||
    deps.start().then(
      () => deps.keyRevocations.publish(keyHash),
      () => false,
    )
  return { ...deps, keyRevocations: { publish } }
}

function publicKey(key: ApiKey) {
  // A test key's rows belong to the account's test tenant; the operator knows the account by its own id.
  const { accountId, livemode } = tenantById(key.account_id)
  return {
    id: key.id,
    account_id: accountId,
    livemode,
    name: key.name,
    key: key.redacted,
    scopes: key.scopes,
    created_at: key.created_at,
    expires_at: key.expires_at,
    last_used_at: key.last_used_at,
  }
}

async function requireAccount(deps: Deps, accountId: string): Promise<void> {
  // A test environment's own id is not an account's.
  if (!tenantById(accountId).livemode || !(await findAccount(deps.database.db, accountId))) {
    throw new UsageError(`no account ${accountId}`)
  }
}
