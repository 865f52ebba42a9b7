// Configuration: parsed once from the environment, validated, frozen. Nothing else reads process.env.
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import path from 'node:path'
import { parseScanningKeys, type ScanningKeys } from './api-keys/secret-scanning.js'

/** The embedded database: its file (or `:memory:`) and how its commits reach the disk. */
export type SqliteConfig = { kind: 'sqlite'; path: string; synchronous: 'NORMAL' | 'FULL' }

export type DatabaseConfig =
  | SqliteConfig
  | {
      kind: 'postgres'
      url: string
      /**
       * DATABASE_POOLER=transaction: DATABASE_URL is a transaction-mode pooler (PgBouncer), so nothing
       * may rely on session state (named statements, LISTEN, session locks or settings).
       */
      pooler?: 'transaction'
      /** DATABASE_DIRECT_URL: the server itself, past the pooler; LISTEN for revocation pushes uses it. */
      directUrl?: string
    }

export interface Config {
  readonly port: number
  readonly host: string
  readonly database: DatabaseConfig
  /** Public base address of the API ({base_url}). */
  readonly apiUrl: string
  /** Public address of the web application ({app_url}). */
  readonly appUrl: string
  /** Signs cursors and CSRF tokens. Undefined on SQLite until resolved from the data dir. */
  readonly secret: string | undefined
  readonly keyPrefix: string
  readonly redisUrl: string | undefined
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  readonly rateLimit: {
    readonly perSecond: number
    readonly burst: number
    readonly authFailuresPerMinute: number
    /** With REDIS_URL: tokens one round trip to Redis may lease for later requests (1: none). */
    readonly lease: number
  }
  /**
   * Which proxies' X-Forwarded-For to believe for the client address (per-IP limits, audit log):
   * none (false), the nearest n hops, or these addresses / CIDR ranges.
   */
  readonly trustProxy: false | number | readonly string[]
  readonly webhooks: WebhooksConfig
  /** Events and delivery records older than this many days are purged. */
  readonly eventRetentionDays: number
  /** The request log (docs/request-log.md): kept this many days; per tenant and UTC day at most maxPerDay stored. */
  readonly requestLog: { readonly retentionDays: number; readonly maxPerDay: number }
  /** MAX_CONTACTS_PER_ACCOUNT: beyond it a create is 403 quota_exceeded (src/contacts/contact-count.ts). */
  readonly maxContactsPerAccount: number
  /** MAX_TEST_CONTACTS_PER_ACCOUNT: the same in an account's test mode (docs/test-mode.md). */
  readonly maxTestContactsPerAccount: number
  /**
   * IDEMPOTENCY_KEYS_PER_ACCOUNT: answers kept per account for Idempotency-Key replays; beyond it the
   * oldest are evicted (src/idempotency/idempotency.ts).
   */
  readonly idempotencyKeysPerAccount: number
  /** SIGN_UPS_PER_HOUR: sign-ups from one client address (IPv6: /64) in any hour; 0 turns the limit off. */
  readonly signUpsPerHour: number
  /** MAX_ACCOUNTS_PER_PERSON: accounts one person may own (sign-up's first included). */
  readonly maxAccountsPerPerson: number
  /**
   * MAX_CONCURRENT_REQUESTS_PER_ACCOUNT: one account's requests in progress at once in one process;
   * beyond it 429 (src/http/connection-limits.ts). 0 turns it off.
   */
  readonly maxConcurrentRequestsPerAccount: number
  /** REQUEST_TIMEOUT_MS: a request (headers and body) must arrive within this; a trickling client is cut off. */
  readonly requestTimeoutMs: number
  /**
   * CSV imports: IMPORT_CONCURRENCY jobs at once per process, IMPORTS_PER_HOUR per account;
   * IMPORT_LEASE_MS (tests shorten it): how long a crashed process's job waits before it resumes.
   */
  readonly imports: { readonly concurrency: number; readonly perHour: number; readonly leaseMs?: number }
  /** METRICS_TOKEN: a scrape of /metrics brings it as a bearer token; unset, only local direct scrapes are answered. */
  readonly metricsToken: string | undefined
  /**
   * SECRET_SCANNING_PUBLIC_KEYS (a file of GitHub's format) and SECRET_SCANNING_ACTION: leaked-key
   * reports are taken only when set (src/api-keys/secret-scanning.ts).
   */
  readonly secretScanning: {
    /** Undefined: no keys file, so no report endpoint (keys report-leak still works). */
    readonly keys: ScanningKeys | undefined
    readonly action: 'revoke' | 'notify'
  }
}

export interface WebhooksConfig {
  /** Deliver webhooks from this process (false: an API-only instance; the worker runs elsewhere). */
  readonly worker: boolean
  /** One delivery attempt's limit, connect + response. */
  readonly timeoutMs: number
  /** Seconds to wait before each retry; its length is the number of retries. */
  readonly retryScheduleS: readonly number[]
  /** Development and tests only: allow http: and loopback/private targets. */
  readonly allowPrivateUrls: boolean
  /**
   * WEBHOOK_LEASE_MARGIN_MS: the room a claim's lease leaves beyond the timeout (delivery-worker.ts);
   * the kill -9 tests shorten it to see a killed attempt retried within seconds.
   */
  readonly leaseMarginMs?: number
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`)
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
const DEFAULT_SQLITE_PATH = './data/contacts.sqlite'
/** The largest value of each rate-limit setting (also what GET /me's `limits` can report). */
export const RATE_LIMIT_MAX = 1_000_000
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5,300,1800,7200,18000,36000,50400,72000,86400'
// A schedule is bounded so a typo cannot keep a delivery alive for months or retry thousands of times.
const RETRY_SCHEDULE_MAX_ENTRIES = 20
const RETRY_DELAY_MAX_S = 7 * 24 * 3600

/** Pure: reads only the given env object. Throws ConfigError listing every problem at once. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = []

  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name]
    if (raw === undefined || raw === '') {
      return fallback
    }
    const value = Number(raw)
    if (!/^\d+$/.test(raw) || value < min || value > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} (got "${raw}")`)
      return fallback
    }
    return value
  }

  const port = integer('PORT', 3000, 0, 65535)
  const host = env.HOST || '127.0.0.1'
  const database = withPooler(
    parseDatabaseUrl(env.DATABASE_URL, env.SQLITE_SYNCHRONOUS, problems),
    env.DATABASE_POOLER,
    env.DATABASE_DIRECT_URL,
    problems,
  )

  const url = (name: string, fallback: string): string => {
    const raw = env[name] || fallback
    try {
      const parsed = new URL(raw)
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new Error('not http')
      }
      return raw.replace(/\/+$/, '')
    } catch {
      problems.push(`${name} must be an http(s) URL (got "${raw}")`)
      return fallback
    }
  }
  const apiUrl = url('API_URL', `http://${host.includes(':') ? `[${host}]` : host}:${port}`)
  const appUrl = url('APP_URL', apiUrl)

  const secret = env.SECRET || undefined
  if (secret !== undefined && secret.length < 32) {
    problems.push('SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`)')
  }
  if (secret === undefined && database.kind === 'postgres') {
    problems.push('SECRET is required with PostgreSQL, so that every instance signs alike')
  }

  const keyPrefix = parseKeyPrefix(env.KEY_PREFIX, problems)

  const logLevel = (env.LOG_LEVEL || 'info') as Config['logLevel']
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`)
  }

  const rateLimit = {
    perSecond: integer('RATE_LIMIT_PER_SECOND', 100, 0, RATE_LIMIT_MAX),
    burst: integer('RATE_LIMIT_BURST', 200, 0, RATE_LIMIT_MAX),
    authFailuresPerMinute: integer('AUTH_FAILURES_PER_MINUTE', 20, 0, RATE_LIMIT_MAX),
    // Each instance may serve up to lease − 1 requests beyond the shared budget (token-lease.ts).
    lease: integer('RATE_LIMIT_LEASE', 10, 1, 1000),
  }

  const trustProxy = parseTrustProxy(env.TRUST_PROXY, problems)

  const choice = <T>(name: string, fallback: T, choices: Record<string, T>): T => {
    const raw = env[name]
    if (raw === undefined || raw === '') {
      return fallback
    }
    // hasOwn: an inherited name such as `toString` is not a choice.
    const value = Object.hasOwn(choices, raw) ? choices[raw] : undefined
    if (value === undefined) {
      problems.push(`${name} must be ${Object.keys(choices).join(' or ')} (got "${raw}")`)
      return fallback
    }
    return value
  }

  const webhooks: WebhooksConfig = {
    worker: choice('WEBHOOK_WORKER', true, { on: true, off: false }),
    // Below 1 s a healthy receiver behind TLS fails; above 60 s one slow endpoint holds a worker slot too long.
    timeoutMs: integer('WEBHOOK_TIMEOUT_MS', 10_000, 1000, 60_000),
    retryScheduleS: parseRetrySchedule(env.WEBHOOK_RETRY_SCHEDULE, problems),
    allowPrivateUrls: choice('WEBHOOK_ALLOW_PRIVATE_URLS', false, { true: true, false: false }),
    ...(env.WEBHOOK_LEASE_MARGIN_MS
      ? { leaseMarginMs: integer('WEBHOOK_LEASE_MARGIN_MS', 30_000, 1000, 600_000) }
      : {}),
  }
  const eventRetentionDays = integer('EVENT_RETENTION_DAYS', 30, 1, 3650)
  const requestLog = {
    retentionDays: integer('REQUEST_LOG_RETENTION_DAYS', 7, 1, 3650),
    // 0 stores nothing: requests are only counted.
    maxPerDay: integer('REQUEST_LOG_MAX_PER_DAY', 1_000_000, 0, 1_000_000_000),
  }
  const maxContactsPerAccount = integer('MAX_CONTACTS_PER_ACCOUNT', 1_000_000, 1, 1_000_000_000)
  const maxTestContactsPerAccount = integer('MAX_TEST_CONTACTS_PER_ACCOUNT', 10_000, 1, 1_000_000_000)
  const idempotencyKeysPerAccount = integer('IDEMPOTENCY_KEYS_PER_ACCOUNT', 20_000, 1, 10_000_000)
  const signUpsPerHour = integer('SIGN_UPS_PER_HOUR', 10, 0, RATE_LIMIT_MAX)
  const maxAccountsPerPerson = integer('MAX_ACCOUNTS_PER_PERSON', 10, 1, 10_000)
  const maxConcurrentRequestsPerAccount = integer('MAX_CONCURRENT_REQUESTS_PER_ACCOUNT', 64, 0, 100_000)
  const requestTimeoutMs = integer('REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000)
  const imports = {
    // Each running import takes a share of one core between requests; 2 leaves the rest to serving.
    concurrency: integer('IMPORT_CONCURRENCY', 2, 1, 32),
    perHour: integer('IMPORTS_PER_HOUR', 20, 1, 10_000),
    ...(env.IMPORT_LEASE_MS ? { leaseMs: integer('IMPORT_LEASE_MS', 15_000, 1000, 600_000) } : {}),
  }
  const metricsToken = env.METRICS_TOKEN || undefined
  if (metricsToken !== undefined && metricsToken.length < 16) {
    problems.push('METRICS_TOKEN must be at least 16 characters')
  }

  const secretScanning = parseSecretScanning(env, problems, choice)

  if (problems.length > 0) {
    throw new ConfigError(problems)
  }
  return Object.freeze({
    port,
    host,
    database: Object.freeze(database),
    apiUrl,
    appUrl,
    secret,
    keyPrefix,
    redisUrl: env.REDIS_URL || undefined,
    logLevel,
    rateLimit: Object.freeze(rateLimit),
    trustProxy,
    webhooks: Object.freeze(webhooks),
    eventRetentionDays,
    requestLog: Object.freeze(requestLog),
    maxContactsPerAccount,
    maxTestContactsPerAccount,
    idempotencyKeysPerAccount,
    signUpsPerHour,
    maxAccountsPerPerson,
    maxConcurrentRequestsPerAccount,
    requestTimeoutMs,
    imports: Object.freeze(imports),
    metricsToken,
    secretScanning,
  })
}

/** What KEY_PREFIX (and `scan --prefix`) may be: the start of every API key. */
export const isKeyPrefix = (value: string): boolean => /^[a-z][a-z0-9]{0,19}$/.test(value)

/**
 * KEY_PREFIX alone, for `contacts-api scan`: it runs in other repositories' hooks, whose environment
 * may hold a DATABASE_URL or PORT meant for something else.
 */
/** The verification keys from SECRET_SCANNING_PUBLIC_KEYS' file, read at start so a bad file stops it. */
function parseSecretScanning(
  env: Record<string, string | undefined>,
  problems: string[],
  choice: <T>(name: string, fallback: T, choices: Record<string, T>) => T,
): Config['secretScanning'] {
  const action = choice<'revoke' | 'notify'>('SECRET_SCANNING_ACTION', 'revoke', { revoke: 'revoke', notify: 'notify' })
  const file = env.SECRET_SCANNING_PUBLIC_KEYS
  if (!file) {
    return Object.freeze({ keys: undefined, action })
  }
  try {
    return Object.freeze({ keys: parseScanningKeys(readFileSync(file, 'utf8')), action })
  } catch (error) {
    problems.push(`SECRET_SCANNING_PUBLIC_KEYS: ${file}: ${(error as Error).message}`)
    return Object.freeze({ keys: undefined, action })
  }
}

export function loadKeyPrefix(env: Record<string, string | undefined> = process.env): string {
  const problems: string[] = []
  const keyPrefix = parseKeyPrefix(env.KEY_PREFIX, problems)
  if (problems.length > 0) {
    throw new ConfigError(problems)
  }
  return keyPrefix
}

function parseKeyPrefix(raw: string | undefined, problems: string[]): string {
  const keyPrefix = raw || 'service'
  if (!isKeyPrefix(keyPrefix)) {
    problems.push(`KEY_PREFIX must be 1-20 lowercase letters or digits (got "${keyPrefix}")`)
  }
  return keyPrefix
}

/** `WEBHOOK_RETRY_SCHEDULE`: comma-separated delays in seconds, each a positive integer. */
function parseRetrySchedule(raw: string | undefined, problems: string[]): readonly number[] {
  const text = raw === undefined || raw.trim() === '' ? DEFAULT_WEBHOOK_RETRY_SCHEDULE : raw
  const entries = text.split(',').map((entry) => entry.trim())
  const valid = entries.every(
    (entry) => /^\d+$/.test(entry) && Number(entry) >= 1 && Number(entry) <= RETRY_DELAY_MAX_S,
  )
  if (!valid || entries.length > RETRY_SCHEDULE_MAX_ENTRIES) {
    problems.push(
      `WEBHOOK_RETRY_SCHEDULE must be 1 to ${RETRY_SCHEDULE_MAX_ENTRIES} comma-separated delays in seconds, each from 1 to ${RETRY_DELAY_MAX_S} (got "${raw}")`,
    )
    return Object.freeze(DEFAULT_WEBHOOK_RETRY_SCHEDULE.split(',').map(Number))
  }
  return Object.freeze(entries.map(Number))
}

/** `TRUST_PROXY`: unset (trust no proxy), a hop count (`1` behind one load balancer), or addresses and CIDR ranges. */
function parseTrustProxy(raw: string | undefined, problems: string[]): Config['trustProxy'] {
  if (raw === undefined || raw.trim() === '') {
    return false
  }
  if (/^\d+$/.test(raw.trim())) {
    return Number(raw.trim())
  }
  const entries = raw.split(',').map((entry) => entry.trim())
  const bad = entries.filter((entry) => {
    const [address = '', bits, ...rest] = entry.split('/')
    const family = isIP(address)
    const maxBits = family === 6 ? 128 : 32
    return family === 0 || rest.length > 0 || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits))
  })
  if (bad.length > 0) {
    problems.push(
      `TRUST_PROXY must be a hop count or comma-separated IP addresses / CIDR ranges (bad: ${bad.join(', ')})`,
    )
    return false
  }
  return Object.freeze(entries)
}

function parseDatabaseUrl(
  raw: string | undefined,
  synchronousRaw: string | undefined,
  problems: string[],
): DatabaseConfig {
  const synchronous = (synchronousRaw || 'NORMAL').toUpperCase()
  if (synchronous !== 'NORMAL' && synchronous !== 'FULL') {
    problems.push(`SQLITE_SYNCHRONOUS must be NORMAL or FULL (got "${synchronousRaw}")`)
  }
  const sync = synchronous === 'FULL' ? 'FULL' : 'NORMAL'
  if (raw === undefined || raw === '') {
    return { kind: 'sqlite', path: DEFAULT_SQLITE_PATH, synchronous: sync }
  }
  if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    return { kind: 'postgres', url: raw }
  }
  if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')
    if (file === '') {
      problems.push('DATABASE_URL sqlite: needs a path, e.g. sqlite:./data/contacts.sqlite')
    }
    return { kind: 'sqlite', path: file === ':memory:' ? file : path.normalize(file), synchronous: sync }
  }
  problems.push(`DATABASE_URL must start with sqlite: or postgres:// (got "${redactUrl(raw)}")`)
  return { kind: 'sqlite', path: DEFAULT_SQLITE_PATH, synchronous: sync }
}

/** `DATABASE_POOLER` and `DATABASE_DIRECT_URL`: only meaningful with PostgreSQL. */
function withPooler(
  database: DatabaseConfig,
  poolerRaw: string | undefined,
  directRaw: string | undefined,
  problems: string[],
): DatabaseConfig {
  const pooler = poolerRaw === undefined || poolerRaw === '' || poolerRaw === 'none' ? undefined : poolerRaw
  if (pooler !== undefined && pooler !== 'transaction') {
    problems.push(`DATABASE_POOLER must be transaction or none (got "${poolerRaw}")`)
  }
  const directUrl = directRaw || undefined
  if (directUrl !== undefined && !/^postgres(ql)?:\/\//.test(directUrl)) {
    problems.push(`DATABASE_DIRECT_URL must start with postgres:// (got "${redactUrl(directUrl)}")`)
  }
  if (database.kind !== 'postgres') {
    if (pooler !== undefined || directUrl !== undefined) {
      problems.push('DATABASE_POOLER and DATABASE_DIRECT_URL apply only when DATABASE_URL is postgres://')
    }
    return database
  }
  return {
    ...database,
    ...(pooler === 'transaction' ? { pooler } : {}),
    ...(directUrl !== undefined ? { directUrl } : {}),
  }
}

/** Hides a password in a connection URL before it is printed. */
function redactUrl(raw: string): string {
  return raw.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@')
}
