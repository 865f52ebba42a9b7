// Configuration is read once and checked whole: every problem is reported at once.
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'

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
      rateLimit: { perSecond: 100, burst: 200, authFailuresPerMinute: 20 },
      trustProxy: false,
    })
    expect(Object.isFrozen(config)).toBe(true)
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
})
