// The contacts-api command line: serve, migrate, accounts and keys. Exit 2 on bad arguments.
import { parseArgs } from 'node:util'
import { createAccountWithKey } from '../accounts/accounts.js'
import { findAccount } from '../accounts/accounts.store.js'
import { FULL_SCOPES, READ_ONLY_SCOPES } from '../api-keys/api-key.js'
import {
  type ApiKey,
  findApiKeyById,
  issueApiKey,
  keyState,
  listApiKeys,
  revokeApiKey,
} from '../api-keys/api-keys.store.js'
import { type Config, ConfigError, loadConfig } from '../config.js'
import { migrateDown, migrateToLatest, migrationStatus } from '../db/migrate.js'
import { closeDeps, createDeps, type Deps } from '../deps.js'
import { startServer } from '../server.js'

export class UsageError extends Error {}

const USAGE = `Usage: contacts-api <command> [options]

  serve                                   migrate, then serve the API (npm start)
  migrate [up|down|status]                apply (default), roll back one, or list migrations
  accounts create --name NAME             create an account and its first API key
  keys create --account ID [--name NAME] [--read-only] [--expires-at RFC3339]
  keys list --account ID
  keys revoke KEY_ID

  --json    print one JSON object instead of text
  Configuration comes from the environment (see README: DATABASE_URL, SECRET, ...).`

const OPTIONS = {
  json: { type: 'boolean' },
  name: { type: 'string' },
  account: { type: 'string' },
  'read-only': { type: 'boolean' },
  'expires-at': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

export interface CliIo {
  out(text: string): void
  err(text: string): void
}
const processIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}

/** Runs one command; returns the exit code (a running `serve` resolves 0 and keeps the process alive). */
export async function runCli(argv: string[], env = process.env, io: CliIo = processIo): Promise<number> {
  let config: Config
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(argv)
    if (parsed.values.help || parsed.positionals.length === 0) {
      io.out(USAGE)
      return parsed.values.help ? 0 : 2
    }
    config = loadConfig(env)
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      io.err(`contacts-api: ${error.message}`)
      return 2
    }
    throw error
  }
  const [command, sub, ...rest] = parsed.positionals
  const json = parsed.values.json === true

  if (command === 'serve') {
    const server = await startServer(config)
    io.err(
      `Contacts API listening on ${server.address} (API at ${server.address}/api/v1, docs at ${server.address}/docs)`,
    )
    if (!server.hasAccounts) {
      io.err('No account yet. Create one and its first API key:  npm run cli -- accounts create --name Acme')
    }
    return 0
  }

  const deps = createDeps(config)
  try {
    const run = COMMANDS[`${command} ${sub ?? ''}`.trim()] ?? COMMANDS[command ?? '']
    if (!run) {
      throw new UsageError(`unknown command "${[command, sub].filter(Boolean).join(' ')}"; see contacts-api --help`)
    }
    const args = COMMANDS[`${command} ${sub ?? ''}`.trim()] ? rest : [sub, ...rest].filter((a) => a !== undefined)
    const result = await run(deps, parsed.values, args)
    io.out(json ? JSON.stringify(result.json) : result.text)
    return 0
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`contacts-api: ${error.message}`)
      return 2
    }
    io.err(`contacts-api: ${error instanceof Error ? error.message : String(error)}`)
    return 1
  } finally {
    await closeDeps(deps)
  }
}

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError((error as Error).message.split('\n')[0] ?? 'bad arguments')
  }
}

type Values = ReturnType<typeof parse>['values']
type Command = (deps: Deps, values: Values, args: string[]) => Promise<{ text: string; json: unknown }>

const COMMANDS: Record<string, Command> = {
  migrate: async (deps, _values, args) => {
    const [direction = 'up', ...extra] = args
    noExtra(extra)
    if (direction === 'status') {
      const status = await migrationStatus(deps.database)
      return {
        text: status.map((m) => `${m.executed_at ? 'applied' : 'pending'}  ${m.name}`).join('\n'),
        json: { migrations: status },
      }
    }
    if (direction !== 'up' && direction !== 'down') {
      throw new UsageError(`migrate takes up, down or status (got "${direction}")`)
    }
    const names = direction === 'up' ? await migrateToLatest(deps.database) : await migrateDown(deps.database)
    const verb = direction === 'up' ? 'Applied' : 'Rolled back'
    return {
      text: names.length ? `${verb}: ${names.join(', ')}` : 'Nothing to do.',
      json: { [direction === 'up' ? 'applied' : 'rolled_back']: names },
    }
  },

  'accounts create': async (deps, values, args) => {
    noExtra(args)
    const name = requireText(values.name, '--name')
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
  },

  'keys create': async (deps, values, args) => {
    noExtra(args)
    await migrateToLatest(deps.database)
    const accountId = await requireAccount(deps, values.account)
    const expiresAt = values['expires-at'] === undefined ? null : parseFuture(values['expires-at'], deps.clock.now())
    const { apiKey, secret } = await issueApiKey(deps.database.db, accountId, {
      name: values.name === undefined ? 'Default' : requireText(values.name, '--name'),
      scopes: values['read-only'] ? READ_ONLY_SCOPES : FULL_SCOPES,
      expiresAt,
      now: deps.clock.now(),
      prefix: deps.config.keyPrefix,
    })
    return {
      text: `API key ${apiKey.id} (${apiKey.name}, ${apiKey.scopes.join('+')}), shown only this once:\n  ${secret}`,
      json: { api_key: { ...publicKey(apiKey), secret } },
    }
  },

  'keys list': async (deps, values, args) => {
    noExtra(args)
    await migrateToLatest(deps.database)
    const accountId = await requireAccount(deps, values.account)
    const now = deps.clock.now()
    const keys = (await listApiKeys(deps.database.db, accountId, deps.config.keyPrefix)).map((k) => ({
      ...publicKey(k),
      status: keyState(k, now),
    }))
    return {
      text: keys.length
        ? keys
            .map((k) => `${k.id}  ${k.key}  ${k.status.padEnd(7)}  ${k.scopes.join('+').padEnd(10)}  ${k.name}`)
            .join('\n')
        : 'No keys.',
      json: { api_keys: keys },
    }
  },

  'keys revoke': async (deps, _values, args) => {
    const [keyId, ...extra] = args
    noExtra(extra)
    if (!keyId) {
      throw new UsageError('keys revoke needs a KEY_ID')
    }
    await migrateToLatest(deps.database)
    const key = await findApiKeyById(deps.database.db, keyId, deps.config.keyPrefix)
    if (!key) {
      throw new UsageError(`no API key ${keyId}`)
    }
    await revokeApiKey(deps.database.db, key.account_id, key.id, deps.clock.now())
    return {
      text: `Revoked ${key.id} (${key.name}). Running servers refuse it within 1 second.`,
      json: { api_key: { ...publicKey(key), status: 'revoked' } },
    }
  },
}

function publicKey(key: ApiKey) {
  return {
    id: key.id,
    account_id: key.account_id,
    name: key.name,
    key: key.redacted,
    scopes: key.scopes,
    created_at: key.created_at,
    expires_at: key.expires_at,
    last_used_at: key.last_used_at,
  }
}

function noExtra(args: string[]): void {
  if (args.length > 0) {
    throw new UsageError(`unexpected argument "${args[0]}"`)
  }
}

function requireText(value: string | undefined, flag: string): string {
  const text = value?.trim()
  if (!text || text.length > 256 || text.includes('\u0000')) {
    throw new UsageError(`${flag} needs a value of 1-256 characters`)
  }
  return text
}

async function requireAccount(deps: Deps, id: string | undefined): Promise<string> {
  const accountId = requireText(id, '--account')
  if (!(await findAccount(deps.database.db, accountId))) {
    throw new UsageError(`no account ${accountId}`)
  }
  return accountId
}

function parseFuture(value: string, now: Date): Date {
  const date = new Date(value)
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(date.getTime()) || date <= now) {
    throw new UsageError(`--expires-at must be a future RFC 3339 time, e.g. 2027-01-01T00:00:00Z (got "${value}")`)
  }
  return date
}
