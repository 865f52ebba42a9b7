// Configuration is read once and checked whole: every problem is reported at once.
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'
import { revocationPushWarning } from './deps.js'

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env)
  } catch (error) {
    if (error instanceof ConfigError) {
      return error.problems
    }
    throw error
  }
  return []
}

describe('loadConfig', () => {
  it('defaults: SQLite in ./data, port 3000 on 127.0.0.1, limits on, no proxy trusted', () => {
    const config = loadConfig({})
    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      database: { kind: 'sqlite', synchronous: 'NORMAL' },
      apiUrl: 'http://127.0.0.1:3000',
      appUrl: 'http://127.0.0.1:3000',
      keyPrefix: 'service',
      rateLimit: { perSecond: 100, burst: 200, authFailuresPerMinute: 20, lease: 10 },
      trustProxy: false,
      webhooks: {
        worker: true,
        timeoutMs: 10_000,
        retryScheduleS: [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400],
        allowPrivateUrls: false,
      },
      eventRetentionDays: 30,
      signUpsPerHour: 10,
      maxAccountsPerPerson: 10,
    })
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.webhooks)).toBe(true)
    expect(Object.isFrozen(config.webhooks.retryScheduleS)).toBe(true)
  })

  it('webhook settings', () => {
    const config = loadConfig({
      WEBHOOK_WORKER: 'off',
      WEBHOOK_TIMEOUT_MS: '2500',
      WEBHOOK_RETRY_SCHEDULE: ' 1, 60 ,3600',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      EVENT_RETENTION_DAYS: '3650',
    })
    expect(config.webhooks).toEqual({
      worker: false,
      timeoutMs: 2500,
      retryScheduleS: [1, 60, 3600],
      allowPrivateUrls: true,
    })
    expect(config.eventRetentionDays).toBe(3650)
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: String(7 * 24 * 3600) }).webhooks.retryScheduleS).toEqual([604800])
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: Array(20).fill('1').join(',') }).webhooks.retryScheduleS).toHaveLength(
      20,
    )
  })

  it('lists every webhook problem at once', () => {
    expect(
      problemsOf({
        WEBHOOK_WORKER: 'yes',
        WEBHOOK_TIMEOUT_MS: '999',
        WEBHOOK_RETRY_SCHEDULE: '5,,300',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'TRUE',
        EVENT_RETENTION_DAYS: '0',
      }),
    ).toEqual([
      'WEBHOOK_WORKER must be on or off (got "yes")',
      'WEBHOOK_TIMEOUT_MS must be an integer from 1000 to 60000 (got "999")',
      'WEBHOOK_RETRY_SCHEDULE must be 1 to 20 comma-separated delays in seconds, each from 1 to 604800 (got "5,,300")',
      'WEBHOOK_ALLOW_PRIVATE_URLS must be true or false (got "TRUE")',
      'EVENT_RETENTION_DAYS must be an integer from 1 to 3650 (got "0")',
    ])
  })

  it.each(['0', '-5', '5,300,', '1.5', '5;300', '1e3', '604801', 'toString', Array(21).fill('1').join(',')])(
    'WEBHOOK_RETRY_SCHEDULE=%j is refused',
    (raw) => {
      expect(problemsOf({ WEBHOOK_RETRY_SCHEDULE: raw })).toHaveLength(1)
    },
  )

  it.each([
    ['WEBHOOK_WORKER', 'toString'],
    ['WEBHOOK_ALLOW_PRIVATE_URLS', '1'],
    ['WEBHOOK_TIMEOUT_MS', '60001'],
    ['WEBHOOK_TIMEOUT_MS', '10s'],
    ['EVENT_RETENTION_DAYS', '3651'],
  ])('%s=%j is refused', (name, raw) => {
    expect(problemsOf({ [name]: raw })).toHaveLength(1)
  })

  it('CSV import settings: defaults, values, and every problem at once', () => {
    expect(loadConfig({}).imports).toEqual({ concurrency: 2, perHour: 20 })
    expect(loadConfig({ IMPORT_CONCURRENCY: '4', IMPORTS_PER_HOUR: '100', IMPORT_LEASE_MS: '2000' }).imports).toEqual({
      concurrency: 4,
      perHour: 100,
      leaseMs: 2000,
    })
    expect(problemsOf({ IMPORT_CONCURRENCY: '0', IMPORTS_PER_HOUR: '1e3', IMPORT_LEASE_MS: '999' })).toEqual([
      'IMPORT_CONCURRENCY must be an integer from 1 to 32 (got "0")',
      'IMPORTS_PER_HOUR must be an integer from 1 to 10000 (got "1e3")',
      'IMPORT_LEASE_MS must be an integer from 1000 to 600000 (got "999")',
    ])
  })

  it('lists every problem at once', () => {
    expect(
      problemsOf({
        PORT: 'eighty',
        DATABASE_URL: 'postgres://db/contacts',
        KEY_PREFIX: 'Bad Prefix',
        RATE_LIMIT_BURST: '-1',
        TRUST_PROXY: 'the load balancer',
      }),
    ).toEqual([
      'PORT must be an integer from 0 to 65535 (got "eighty")',
      'SECRET is required with PostgreSQL, so that every instance signs alike',
      'KEY_PREFIX must be 1-20 lowercase letters or digits (got "Bad Prefix")',
      'RATE_LIMIT_BURST must be an integer from 0 to 1000000 (got "-1")',
      'TRUST_PROXY must be a hop count or comma-separated IP addresses / CIDR ranges (bad: the load balancer)',
    ])
  })

  it.each([
    ['', false],
    ['1', 1],
    ['10.0.0.1', ['10.0.0.1']],
    ['10.0.0.0/8, 2001:db8::/32', ['10.0.0.0/8', '2001:db8::/32']],
  ] as const)('TRUST_PROXY=%j', (raw, expected) => {
    expect(loadConfig({ TRUST_PROXY: raw }).trustProxy).toEqual(expected)
  })

  it.each(['10.0.0.0/33', '2001:db8::/129', '10.0.0.1/8/8', 'localhost', '10.0.0.1,'])(
    'TRUST_PROXY=%j is refused',
    (raw) => {
      expect(problemsOf({ TRUST_PROXY: raw })).toHaveLength(1)
    },
  )

  describe('DATABASE_POOLER and DATABASE_DIRECT_URL', () => {
    const pg = { DATABASE_URL: 'postgres://app@pgbouncer:6432/contacts', SECRET: 'x'.repeat(32) }

    it('unset: a direct connection (named statements, LISTEN on DATABASE_URL)', () => {
      expect(loadConfig(pg).database).toEqual({ kind: 'postgres', url: pg.DATABASE_URL })
      expect(loadConfig({ ...pg, DATABASE_POOLER: 'none' }).database).toEqual({
        kind: 'postgres',
        url: pg.DATABASE_URL,
      })
    })

    it('transaction, with the direct URL for LISTEN', () => {
      const direct = 'postgres://app:pw@db:5432/contacts'
      expect(loadConfig({ ...pg, DATABASE_POOLER: 'transaction', DATABASE_DIRECT_URL: direct }).database).toEqual({
        kind: 'postgres',
        url: pg.DATABASE_URL,
        pooler: 'transaction',
        directUrl: direct,
      })
    })

    it('transaction alone is allowed: revocations then rely on the 1 s cache (a warning at start)', () => {
      const config = loadConfig({ ...pg, DATABASE_POOLER: 'transaction' })
      expect(config.database).toEqual({ kind: 'postgres', url: pg.DATABASE_URL, pooler: 'transaction' })
      expect(revocationPushWarning(config)).toMatch(/without DATABASE_DIRECT_URL or REDIS_URL.*1 s/)
      expect(revocationPushWarning(loadConfig({ ...pg, DATABASE_POOLER: 'transaction', REDIS_URL: 'redis://r' }))).toBe(
        undefined,
      )
      expect(revocationPushWarning(loadConfig(pg))).toBe(undefined)
    })

    it.each([
      [{ ...pg, DATABASE_POOLER: 'session' }, 'DATABASE_POOLER must be transaction or none (got "session")'],
      [
        { ...pg, DATABASE_DIRECT_URL: 'mysql://u:secret@db/x' },
        'DATABASE_DIRECT_URL must start with postgres:// (got "mysql://u:***@db/x")',
      ],
      [
        { DATABASE_POOLER: 'transaction' },
        'DATABASE_POOLER and DATABASE_DIRECT_URL apply only when DATABASE_URL is postgres://',
      ],
    ])('refuses %j', (env, problem) => {
      expect(problemsOf(env)).toEqual([problem])
    })
  })
})
