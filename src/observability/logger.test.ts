// The log sink of a served process (stdout, batched per event-loop turn): nothing is lost when the
// process exits, whether by process.exit or a crash, and secrets are still redacted; and the request
// log never holds an API key, the Authorization header or a session cookie.
import { spawnSync } from 'node:child_process'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createTestHarness } from '../../test/harness.js'
import { buildApp } from '../app.js'

/** Runs `body` in a fresh process with an app logging through loggerOptions (no stream: stdout). */
function run(body: string) {
  const code = `
    import Fastify from 'fastify'
    import { loggerOptions } from './src/observability/logger.ts'
    const app = Fastify({ logger: loggerOptions({ logLevel: 'info' }) })
    ${body}
  `
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    encoding: 'utf8',
  })
  const lines = result.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
  return { status: result.status, lines }
}

describe('the log on standard output', () => {
  it('writes every line, in order, including those of the turn in which the process exits', () => {
    const { status, lines } = run(`
      app.log.info('first')
      setTimeout(() => {
        for (let i = 0; i < 1000; i++) app.log.info({ i }, 'many')
        setTimeout(() => { app.log.info('last'); process.exit(3) }, 5)
      }, 5)
    `)
    expect(status).toBe(3)
    expect(lines.map((line) => line.msg)).toEqual(['first', ...Array(1000).fill('many'), 'last'])
    expect(lines.filter((line) => line.msg === 'many').map((line) => line.i)).toEqual([...Array(1000).keys()])
  })

  it('writes the lines logged just before a crash', () => {
    const { status, lines } = run(`
      setTimeout(() => { app.log.error('about to fail'); throw new Error('boom') }, 5)
    `)
    expect(status).toBe(1)
    expect(lines.map((line) => line.msg)).toEqual(['about to fail'])
  })

  it('redacts secrets, at the top level and one level down', () => {
    const { lines } = run(`
      app.log.info({ secret: 'top-secret', api_key: { id: 'key_1', secret: 'nested-secret' } }, 'issued')
    `)
    expect(lines[0]).toMatchObject({ secret: '[REDACTED]', api_key: { id: 'key_1', secret: '[REDACTED]' } })
    expect(JSON.stringify(lines)).not.toMatch(/top-secret|nested-secret/)
  })
})

describe('logs', () => {
  it('never contain an API key, an invitation token, a searched email, the Authorization header, or a session cookie', async () => {
    const t = await createTestHarness({ dialect: 'sqlite' })
    let captured = ''
    const stream = new Writable({
      write(chunk, _encoding, done) {
        captured += chunk
        done()
      },
    })
    const app = await buildApp({ ...t.deps, config: { ...t.deps.config, logLevel: 'trace' } }, { logStream: stream })
    try {
      const acme = await t.createAccount()
      const headers = { authorization: `Bearer ${acme.key}`, cookie: 'sid=session-secret-value' }
      await app.inject({ method: 'GET', url: '/api/v1/me', headers })
      await app.inject({ method: 'POST', url: '/api/v1/contacts', headers, payload: { email: 'log@example.com' } })
      await app.inject({ method: 'GET', url: `/api/v1/me?api_key=${acme.key}` })
      await app.inject({ method: 'GET', url: '/api/v1/contacts/%E0%A4%A', headers })
      await app.inject({ method: 'GET', url: '/sign-in', headers })
      // An invitation link's token is a credential like a key (web/people.routes.ts).
      const invitationToken = 'invitation-token-0123456789abcdefghijklmnopq'
      await app.inject({ method: 'GET', url: `/invitations/${invitationToken}` })
      // What a client searched for is a person's data: the parameters stay, their values do not.
      await app.inject({ method: 'GET', url: '/api/v1/contacts?limit=2&email=who%40example.com&q=Zebulon', headers })
      const lines = captured.trim().split('\n')
      expect(lines.filter((l) => l.includes('"msg":"request"')).length).toBe(7)
      expect(captured).toContain('/api/v1/contacts?limit=2&email=[REDACTED]&q=[REDACTED]')
      expect(captured).not.toMatch(/who%40example|Zebulon/)
      expect(captured).not.toContain(invitationToken)
      expect(captured).toContain('/invitations/[REDACTED]')
      expect(captured).not.toContain(acme.key)
      expect(captured).not.toMatch(/service_live_[A-Za-z0-9]{32}/)
      expect(captured.toLowerCase()).not.toContain('authorization')
      expect(captured).not.toContain('session-secret-value')
      expect(captured).toContain('[REDACTED]')
    } finally {
      await app.close()
      await t.close()
    }
  })

  it('have one line per request with exactly its fields, the Request-Id as reqId and the URL redacted', async () => {
    const t = await createTestHarness({ dialect: 'sqlite' })
    let captured = ''
    const stream = new Writable({
      write(chunk, _encoding, done) {
        captured += chunk
        done()
      },
    })
    const app = await buildApp({ ...t.deps, config: { ...t.deps.config, logLevel: 'info' } }, { logStream: stream })
    try {
      const acme = await t.createAccount()
      const res = await app.inject({
        method: 'GET',
        url: `/api/v1/me?api_key=${acme.key}`,
        headers: { authorization: `Bearer ${acme.key}` },
      })
      await new Promise((resolve) => setImmediate(resolve))
      const lines = captured
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line))
        .filter((line) => line.msg === 'request')
      expect(lines).toHaveLength(1)
      const [line] = lines
      expect(Object.keys(line)).toEqual([
        'level',
        'time',
        'pid',
        'hostname',
        'reqId',
        'method',
        'url',
        'status',
        'ms',
        'account_id',
        'msg',
      ])
      expect(line).toMatchObject({
        level: 30,
        reqId: res.headers['request-id'],
        method: 'GET',
        url: '/api/v1/me?api_key=[REDACTED]',
        status: res.statusCode,
        account_id: acme.id,
      })
      expect(typeof line.ms).toBe('number')
    } finally {
      await app.close()
      await t.close()
    }
  })
})
