// Protocol-level behaviour shared by every route: 404/405, HEAD, CORS, Request-Id, the OpenAPI
// document and its inventory, health checks, and failures that must not leak internals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { closeDeps, createDeps } from '../src/deps.js'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness, testConfig } from './harness.js'
import { expectProblem } from './helpers.js'

describe.each(testDialects())('HTTP conventions on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterAll(() => t.close())

  it('unknown paths are 404 not_found problems, with or without a key', async () => {
    for (const url of ['/nope', '/api/v1/nope', '/api/v0/contacts', '/api/v1/internal', '/api/v1/contacts/']) {
      expectProblem(await t.inject(acme, { method: 'GET', url }), 404, 'not_found')
    }
  })

  it('a known path with another method is 405 with Allow, and changes nothing', async () => {
    const cases: Array<[string, string, string]> = [
      ['PUT', '/api/v1/contacts/con_01M00000000000000000000000', 'DELETE, GET, HEAD, PATCH'],
      ['DELETE', '/api/v1/contacts', 'GET, HEAD, POST'],
      ['POST', '/api/v1/me', 'GET, HEAD'],
      ['PATCH', '/api/v1/events', 'GET, HEAD'],
    ]
    for (const [method, url, allow] of cases) {
      const res = await t.inject(acme, { method: method as 'PUT', url, payload: {} })
      expectProblem(res, 405, 'method_not_allowed')
      expect(res.headers.allow?.split(', ').sort().join(', ')).toBe(allow)
    }
    const trace = await t.inject(acme, { method: 'TRACE' as 'GET', url: '/api/v1/contacts' })
    expect([404, 405]).toContain(trace.statusCode)
    expect((await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).json().contacts).toEqual([])
  })

  it('HEAD is answered like GET without a body, and needs the key too', async () => {
    const head = await t.inject(acme, { method: 'HEAD', url: '/api/v1/me' })
    expect(head.statusCode).toBe(200)
    expect(head.body).toBe('')
    expect(head.headers['request-id']).toMatch(/^req_/)
    const anonymous = await t.app.inject({ method: 'HEAD', url: '/api/v1/contacts' })
    expect(anonymous.statusCode).toBe(401)
    expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="api"')
  })

  it('sends no CORS allowance, to a preflight or to a cross-origin request', async () => {
    const preflight = await t.app.inject({
      method: 'OPTIONS',
      url: '/api/v1/contacts',
      headers: {
        origin: 'https://evil.example',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    })
    expect(preflight.statusCode).toBeGreaterThanOrEqual(400)
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined()
    const cross = await t.inject(acme, {
      method: 'GET',
      url: '/api/v1/me',
      headers: { origin: 'https://evil.example' },
    })
    expect(cross.statusCode).toBe(200)
    expect(cross.headers['access-control-allow-origin']).toBeUndefined()
    expect(cross.headers['access-control-allow-credentials']).toBeUndefined()
  })

  it('every response has a fresh Request-Id; a client-sent one is not trusted', async () => {
    const ids = new Set<string>()
    for (const request of [
      { method: 'GET' as const, url: '/healthz' },
      { method: 'GET' as const, url: '/api/v1/me' },
      { method: 'GET' as const, url: '/nope' },
      { method: 'GET' as const, url: '/api/v1/openapi.json' },
    ]) {
      const res = await t.inject(acme, { ...request, headers: { 'request-id': 'req_forged' } })
      expect(res.headers['request-id']).toMatch(/^req_[0-9A-Z]{26}$/)
      ids.add(String(res.headers['request-id']))
    }
    expect(ids.size).toBe(4)
  })

  it('serves /healthz and /readyz', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' })
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' })
    expect(ready.statusCode).toBe(200)
    expect(ready.json()).toEqual({ status: 'ok' })
  })

  it('publishes OpenAPI 3.1 without a key, documenting exactly the routes that exist', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
    expect(res.statusCode).toBe(200)
    const doc = res.json()
    expect(doc.openapi).toBe('3.1.0')
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' })

    const documented = new Set<string>()
    for (const [path, operations] of Object.entries(
      doc.paths as Record<string, Record<string, { security?: unknown }>>,
    )) {
      for (const [method, operation] of Object.entries(operations)) {
        documented.add(`${method.toUpperCase()} ${path}`)
        if (path.startsWith('/api/v1/')) {
          expect(operation.security, `${method} ${path}`).toEqual([{ apiKey: [] }])
        }
      }
    }
    expect([...documented].sort()).toEqual(
      [
        'GET /api/v1/me',
        'GET /api/v1/contacts',
        'POST /api/v1/contacts',
        'POST /api/v1/contacts/upsert',
        'GET /api/v1/contacts/{id}',
        'PATCH /api/v1/contacts/{id}',
        'DELETE /api/v1/contacts/{id}',
        'GET /api/v1/events',
        'GET /healthz',
        'GET /readyz',
      ].sort(),
    )
    // Every documented operation answers (no documented route that does not exist).
    for (const entry of documented) {
      const [method, path] = entry.split(' ') as [string, string]
      const url = path.replace('{id}', 'con_01M00000000000000000000000')
      const payload = method === 'POST' || method === 'PATCH' ? { payload: { email: 'doc@example.com' } } : {}
      const answer = await t.inject(acme, { method: method as 'GET', url, ...payload })
      expect(answer.statusCode, entry).toBeLessThan(500)
      if (answer.statusCode === 404) {
        // The contact is unknown, but the route exists.
        expect(answer.json().detail, entry).toBe('No contact with this id exists in this account.')
      } else {
        expect(answer.statusCode, entry).toBeLessThan(300)
      }
    }
    // The contact schema and the problem schema are in the document.
    const list = doc.paths['/api/v1/contacts'].get.responses['200'].content['application/json'].schema
    expect(JSON.stringify(list)).toContain('next_cursor')
    expect(JSON.stringify(doc)).not.toMatch(/key_hash|account_id"\s*:\s*\{/)
  })

  it('serves the reference page at /docs and the error catalogue at /docs/errors', async () => {
    const docs = await t.app.inject({ method: 'GET', url: '/docs' })
    expect([200, 302]).toContain(docs.statusCode)
    const errors = await t.app.inject({ method: 'GET', url: '/docs/errors' })
    expect(errors.statusCode).toBe(200)
    expect(errors.body).toContain('id="invalid_cursor"')
  })

  it('an internal failure is a generic 500 problem: no message, stack or SQL', async () => {
    // Break the storage under one account's feet: drop a table the events list needs.
    const broken = await createTestHarness({ dialect })
    try {
      const account = await broken.createAccount()
      await broken.db.schema.dropTable('events').execute()
      const res = await broken.inject(account, { method: 'GET', url: '/api/v1/events' })
      const body = expectProblem(res, 500, 'internal_error')
      expect(body.detail).toBe('Something went wrong on our side.')
      expect(res.body).not.toMatch(/events|select|relation|table|stack|at /i)
    } finally {
      await broken.close()
    }
  })
})

describe('PostgreSQL unreachable', () => {
  it('answers a quick 503 service_unavailable with Retry-After, and /readyz says so', async () => {
    // Port 1 on loopback refuses connections at once: a database that is down.
    const config = testConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/contacts' })
    const deps = createDeps(config)
    const app = await buildApp(deps, { logger: false })
    try {
      const started = Date.now()
      const res = await app.inject({
        method: 'GET',
        url: '/api/v1/contacts',
        headers: { authorization: `Bearer service_live_${'C'.repeat(32)}` },
      })
      const body = expectProblem(res, 503, 'service_unavailable')
      expect(res.headers['retry-after']).toBe('1')
      expect(Date.now() - started).toBeLessThan(5000)
      expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres/)
      expectProblem(await app.inject({ method: 'GET', url: '/readyz' }), 503, 'service_unavailable')
    } finally {
      await app.close()
      await closeDeps(deps)
    }
  })
})
