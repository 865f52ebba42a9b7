// Protocol-level behaviour shared by every route: 404/405, HEAD, CORS, Request-Id, the OpenAPI
// document and its inventory, health checks, and failures that must not leak internals.
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { closeDeps, createDeps } from '../src/deps.js'
import { eventPayload } from '../src/webhooks/payload.js'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness, testConfig } from './harness.js'
import { expectProblem } from './helpers.js'
import { staticResolver } from './static-resolver.js'

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default

interface Operation {
  operationId: string
  description?: string
  tags: string[]
  responses: Record<
    string,
    { description?: string; content?: Record<string, unknown>; headers?: Record<string, unknown> }
  >
}

/** A contact with every field set, at the limits the schemas document. */
const full = {
  email: 'full@example.com',
  first_name: 'F'.repeat(256),
  last_name: 'Lovelace',
  phone: '+441632960961',
  company: 'Analytical Engines',
  job_title: 'Countess',
  tags: Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(64, 't')),
  custom_fields: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i % 2 ? 'v'.repeat(500) : i])),
}

describe.each(testDialects())('HTTP conventions on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeAll(async () => {
    t = await createTestHarness({ dialect, resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'] }) })
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

  it('every API response says Cache-Control: no-store and X-Content-Type-Options: nosniff (docs/design.md#fair-share)', async () => {
    const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { first_name: 'H' } })
    for (const res of [
      await t.inject(acme, { method: 'GET', url: '/api/v1/me' }),
      await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?limit=1' }),
      created,
      await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${created.json().id}` }),
      await t.inject(acme, { method: 'GET', url: '/api/v1/contacts/con_nope' }),
      await t.inject(null, { method: 'GET', url: '/api/v1/me' }),
      await t.inject(acme, { method: 'PATCH', url: '/api/v1/events' }),
      await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?q=%zz' }),
      await t.inject(acme, { method: 'GET', url: '/api/v1/openapi.json' }),
    ]) {
      expect([res.statusCode, res.headers['cache-control']]).toEqual([res.statusCode, 'no-store'])
      expect([res.statusCode, res.headers['x-content-type-options']]).toEqual([res.statusCode, 'nosniff'])
    }
    // The web app's static assets keep their own caching.
    const css = await t.app.inject({ method: 'GET', url: '/assets/app.css' })
    expect(css.headers['cache-control']).toBe('public, max-age=3600')
    expect(css.headers['x-content-type-options']).toBe('nosniff')
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
        'POST /api/v1/contacts/batch',
        'GET /api/v1/contacts/{id}',
        'PATCH /api/v1/contacts/{id}',
        'DELETE /api/v1/contacts/{id}',
        'GET /api/v1/events',
        'GET /api/v1/events/{id}',
        'GET /api/v1/webhook_endpoints',
        'POST /api/v1/webhook_endpoints',
        'GET /api/v1/webhook_endpoints/{id}',
        'PATCH /api/v1/webhook_endpoints/{id}',
        'DELETE /api/v1/webhook_endpoints/{id}',
        'POST /api/v1/webhook_endpoints/{id}/roll_secret',
        'POST /api/v1/webhook_endpoints/{id}/test',
        'GET /api/v1/webhook_endpoints/{id}/deliveries',
        'GET /api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}',
        'POST /api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry',
        'GET /api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/attempts',
        'POST /api/v1/webhook_endpoints/{id}/recover',
        'GET /api/v1/request_logs',
        'GET /api/v1/request_logs/{id}',
        'GET /healthz',
        'GET /readyz',
      ].sort(),
    )
    // Every documented operation answers (no documented route that does not exist).
    for (const entry of documented) {
      const [method, path] = entry.split(' ') as [string, string]
      const url = path
        .replace('{id}', 'con_01M00000000000000000000000')
        .replace('{delivery_id}', 'wd_01M00000000000000000000000')
      const webhooks = path.startsWith('/api/v1/webhook_endpoints')
      const body = path.endsWith('/batch')
        ? { operations: [{ op: 'create', contact: { email: 'batch@example.com' } }] }
        : !webhooks
          ? { email: 'doc@example.com' }
          : path === '/api/v1/webhook_endpoints'
            ? { url: 'https://hooks.example.com/doc' }
            : method === 'PATCH'
              ? { description: 'doc' }
              : path.endsWith('/roll_secret')
                ? {}
                : path.endsWith('/recover')
                  ? { since: '2026-01-01T00:00:00Z' }
                  : undefined
      const payload = (method === 'POST' || method === 'PATCH') && body ? { payload: body } : {}
      const answer = await t.inject(acme, { method: method as 'GET', url, ...payload })
      expect(answer.statusCode, entry).toBeLessThan(500)
      if (answer.statusCode === 404) {
        // The contact (event, webhook endpoint) is unknown, but the route exists.
        expect(answer.json().detail, entry).toMatch(
          /^No (contact|event|webhook endpoint|request log) with this id exists in this account\.$/,
        )
      } else {
        expect(answer.statusCode, entry).toBeLessThan(300)
      }
    }
    // The contact schema and the problem schema are in the document.
    const list = doc.paths['/api/v1/contacts'].get.responses['200'].content['application/json'].schema
    expect(list).toEqual({ $ref: '#/components/schemas/ContactList' })
    expect(JSON.stringify(doc.components.schemas.ContactList)).toContain('next_cursor')
    expect(JSON.stringify(doc)).not.toMatch(/key_hash|account_id"\s*:\s*\{/)
  })

  it('names its schemas, headers and parameters as components, and refers to them', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    const schemas = doc.components.schemas
    expect(Object.keys(schemas)).toEqual(
      expect.arrayContaining([
        'Account',
        'Contact',
        'ContactInput',
        'ContactUpsertInput',
        'ContactList',
        'Event',
        'ContactCreatedEvent',
        'ContactUpdatedEvent',
        'ContactDeletedEvent',
        'EventList',
        'Problem',
        'WebhookEndpoint',
        'WebhookEndpointWithSecret',
        'WebhookEndpointCreateInput',
        'WebhookEndpointUpdateInput',
        'WebhookEndpointList',
        'WebhookDelivery',
        'WebhookDeliveryList',
      ]),
    )
    const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
    const body = (path: string, method: string) =>
      doc.paths[path][method].requestBody.content['application/json'].schema
    const answer = (path: string, method: string, status: string) =>
      doc.paths[path][method].responses[status].content['application/json'].schema
    expect(body('/api/v1/contacts', 'post')).toEqual(ref('ContactInput'))
    expect(body('/api/v1/contacts/{id}', 'patch')).toEqual(ref('ContactInput'))
    expect(body('/api/v1/contacts/upsert', 'post')).toEqual(ref('ContactUpsertInput'))
    expect(body('/api/v1/webhook_endpoints', 'post')).toEqual(ref('WebhookEndpointCreateInput'))
    expect(answer('/api/v1/contacts', 'post', '201')).toEqual(ref('Contact'))
    expect(answer('/api/v1/me', 'get', '200')).toEqual(ref('Account'))
    expect(answer('/api/v1/events/{id}', 'get', '200')).toEqual(ref('Event'))
    expect(answer('/api/v1/events', 'get', '200')).toEqual(ref('EventList'))
    expect(answer('/api/v1/webhook_endpoints', 'get', '200')).toEqual(ref('WebhookEndpointList'))
    expect(answer('/api/v1/webhook_endpoints/{id}/deliveries', 'get', '200')).toEqual(ref('WebhookDeliveryList'))
    // The webhook payloads refer to the same Contact.
    expect(schemas.ContactCreatedPayload.properties.data.properties.object).toEqual(ref('Contact'))
    // Event: a union told apart by `type`, each contact.* event carrying a Contact.
    expect(schemas.Event.discriminator).toEqual({
      propertyName: 'type',
      mapping: {
        'contact.created': '#/components/schemas/ContactCreatedEvent',
        'contact.updated': '#/components/schemas/ContactUpdatedEvent',
        'contact.deleted': '#/components/schemas/ContactDeletedEvent',
        'api_key.exposed': '#/components/schemas/ApiKeyExposedEvent',
      },
    })
    expect(schemas.Event.oneOf).toHaveLength(4)
    expect(schemas.ApiKeyExposedEvent.properties.data.properties.object).toEqual(ref('ApiKey'))
    expect(schemas.ContactUpdatedEvent.properties.type).toMatchObject({ const: 'contact.updated' })
    expect(schemas.ContactUpdatedEvent.properties.data.properties.object).toEqual(ref('Contact'))
    expect(schemas.Contact.properties.email.anyOf).toContainEqual(expect.objectContaining({ format: 'email' }))
    // No $id is left over in the document: every named schema is a component.
    expect(JSON.stringify(doc)).not.toContain('"$id"')

    // Headers: Request-Id on every response, Location on every 201, the rest where they are sent.
    const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` })
    interface DocumentedOperation {
      parameters?: unknown[]
      responses: Record<string, { headers: Record<string, { $ref: string }> }>
    }
    const operations = Object.entries(doc.paths as Record<string, Record<string, DocumentedOperation>>).flatMap(
      ([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
    )
    for (const { path, method, operation } of operations) {
      const where = `${method} ${path}`
      for (const [status, response] of Object.entries(operation.responses)) {
        expect(response.headers['Request-Id'], `${where} ${status}`).toEqual(headerRef('RequestId'))
        for (const header of Object.values(response.headers)) {
          expect(header.$ref, `${where} ${status}`).toMatch(/^#\/components\/headers\//)
          expect(doc.components.headers[header.$ref.split('/').pop() as string], header.$ref).toBeDefined()
        }
        if (status === '201') {
          expect(response.headers.Location, where).toEqual(headerRef('Location'))
        }
        if (status === '401') {
          expect(response.headers['WWW-Authenticate'], where).toEqual(headerRef('WWWAuthenticate'))
        }
        if (status === '429' || status === '503') {
          expect(response.headers['Retry-After'], `${where} ${status}`).toEqual(headerRef('RetryAfter'))
        }
      }
      const parameters = operation.parameters ?? []
      const idempotencyKey = { $ref: '#/components/parameters/IdempotencyKey' }
      if (method === 'post') {
        expect(parameters, where).toContainEqual(idempotencyKey)
        expect(
          operation.responses['201'] ?? operation.responses['200'] ?? operation.responses['202'],
          where,
        ).toMatchObject({ headers: { 'Idempotent-Replayed': headerRef('IdempotentReplayed') } })
      } else {
        expect(parameters, where).not.toContainEqual(idempotencyKey)
      }
    }
    expect(doc.components.parameters.IdempotencyKey).toMatchObject({ in: 'header', name: 'Idempotency-Key' })
    // A body is required where the server needs one, and optional where it reads none as {}.
    expect(doc.paths['/api/v1/contacts'].post.requestBody.required).toBe(true)
    for (const path of [
      '/api/v1/webhook_endpoints/{id}/roll_secret',
      '/api/v1/webhook_endpoints/{id}/test',
      '/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry',
    ]) {
      expect(doc.paths[path].post.requestBody.required, path).toBe(false)
      expect(doc.paths[path].post['x-body-optional'], path).toBeUndefined()
    }
    // The public routes say they need no key.
    expect(doc.paths['/healthz'].get.security).toEqual([])
    expect(doc.paths['/readyz'].get.security).toEqual([])
  })

  it('every example in the document is valid against its schema', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    const ajv = new Ajv({ strict: false, validateSchema: false, allErrors: true })
    addFormats(ajv)
    ajv.addSchema(doc, 'openapi.json')
    let checked = 0
    const mainBodies = new Set<string>()
    for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          const content = (response.content ?? {}) as Record<
            string,
            { schema: { $ref?: string }; example?: unknown; examples?: Record<string, { value: unknown }> }
          >
          for (const media of Object.values(content)) {
            const { schema } = media
            const examples = [
              ...(media.example === undefined ? [] : [media.example]),
              ...Object.values(media.examples ?? {}).map((e) => e.value),
            ]
            if (!schema.$ref) {
              continue
            }
            const validate = ajv.compile({ $ref: `openapi.json${schema.$ref}` })
            for (const example of examples) {
              expect(validate(example), `${method} ${path} ${status}: ${JSON.stringify(validate.errors)}`).toBe(true)
              checked++
            }
            if (Number(status) < 300 && examples.length > 0) {
              mainBodies.add(schema.$ref.split('/').pop() as string)
            }
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(100)
    // The main success bodies show an example.
    expect([...mainBodies].sort()).toEqual(
      expect.arrayContaining(['Account', 'Contact', 'ContactList', 'Event', 'EventList', 'WebhookEndpoint']),
    )
  })

  it('documents every query parameter as optional, as the server treats it (docs/design.md#pagination)', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    const lists: string[] = []
    for (const [path, operations] of Object.entries(
      doc.paths as Record<
        string,
        Record<string, { parameters?: Array<{ in: string; name: string; required?: boolean }> }>
      >,
    )) {
      for (const [method, operation] of Object.entries(operations)) {
        const query = (operation.parameters ?? []).filter((parameter) => parameter.in === 'query')
        if (query.some((parameter) => parameter.name === 'limit')) {
          lists.push(`${method} ${path}`)
        }
        for (const parameter of query) {
          expect(parameter.required ?? false, `${method} ${path} ${parameter.name}`).toBe(false)
        }
      }
    }
    expect(lists.sort()).toEqual([
      'get /api/v1/contacts',
      'get /api/v1/events',
      'get /api/v1/request_logs',
      'get /api/v1/webhook_endpoints',
      'get /api/v1/webhook_endpoints/{id}/deliveries',
      'get /api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/attempts',
    ])
    // And the server agrees: no parameter at all is a first page of the default size, oldest first.
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
    expect(res.statusCode).toBe(200)
  })

  it('documents every operation for clients: an operationId, a description, problems as application/problem+json', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    expect(doc.info.contact.url).toBe(t.deps.config.appUrl)
    expect(doc.servers).toEqual([expect.objectContaining({ url: t.deps.config.apiUrl, 'x-internal': false })])
    const tags = new Set((doc.tags as Array<{ name: string }>).map((tag) => tag.name))
    const operationIds: string[] = []
    for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, operation] of Object.entries(operations)) {
        const where = `${method.toUpperCase()} ${path}`
        operationIds.push(operation.operationId)
        expect(operation.operationId, where).toMatch(/^[a-z][A-Za-z]+$/)
        expect(operation.description, where).toBeTruthy()
        for (const tag of operation.tags) {
          expect(tags.has(tag), `${where} tag ${tag}`).toBe(true)
        }
        const isApi = path.startsWith('/api/v1/')
        expect(Object.keys(operation.responses), where).toEqual(
          expect.arrayContaining(isApi ? ['400', '401', '429', '500', '503'] : ['400', '500']),
        )
        for (const [status, response] of Object.entries(operation.responses)) {
          if (Number(status) >= 400) {
            // One shape for every problem, under the media type the API sends it with, and an example
            // per code with this very status (not one 400 example for every response).
            expect(Object.keys(response.content ?? {}), `${where} ${status}`).toEqual(['application/problem+json'])
            const media = response.content?.['application/problem+json'] as {
              schema: unknown
              examples: Record<string, { value: { status: number; code: string; existing_id?: string } }>
            }
            expect(media.schema, `${where} ${status}`).toEqual({ $ref: '#/components/schemas/Problem' })
            expect(Object.keys(media.examples).length, `${where} ${status}`).toBeGreaterThan(0)
            for (const [code, example] of Object.entries(media.examples)) {
              expect(example.value, `${where} ${status} ${code}`).toMatchObject({
                status: Number(status),
                code,
                type: `/docs/errors#${code}`,
              })
              expect(response.description, `${where} ${status}`).toContain(`\`${code}\``)
              if (code !== 'contact_exists') {
                expect(example.value.existing_id, `${where} ${status} ${code}`).toBeUndefined()
              }
            }
          }
          if (isApi && Number(status) < 500) {
            expect(Object.keys(response.headers ?? {}), `${where} ${status}`).toEqual(
              expect.arrayContaining(['RateLimit', 'RateLimit-Policy']),
            )
          }
        }
        if (isApi) {
          expect(operation.responses['429']?.headers, where).toHaveProperty('Retry-After')
          expect(operation.responses['401']?.headers, where).toHaveProperty('WWW-Authenticate')
        }
      }
    }
    expect(new Set(operationIds).size).toBe(operationIds.length)
    // Nothing is documented as a plain JSON problem any more.
    expect(JSON.stringify(doc.paths)).not.toMatch(
      /"application\/json":\{"schema":\{"\$ref":"#\/components\/schemas\/Problem"/,
    )
  })

  it('the documented schemas accept what the API actually sends', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    const ajv = new Ajv({ strict: false, validateSchema: false, allErrors: true })
    addFormats(ajv)
    ajv.addSchema(doc, 'openapi.json')
    const pointer = (...parts: string[]) =>
      parts.map((part) => part.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')
    const expectDocumented = (res: LightMyRequestResponse, path: string, method: string) => {
      const status = String(res.statusCode)
      const [mediaType] = String(res.headers['content-type']).split(';') as [string]
      const response = doc.paths[path][method].responses[status]
      expect(response, `${method} ${path} ${status}`).toBeDefined()
      expect(Object.keys(response.content), `${method} ${path} ${status}`).toEqual([mediaType])
      const validate = ajv.compile({
        $ref: `openapi.json#/${pointer('paths', path, method, 'responses', status, 'content', mediaType, 'schema')}`,
      })
      expect(validate(res.json()), JSON.stringify(validate.errors)).toBe(true)
    }
    const account = await t.createAccount()
    const created = await t.inject(account, { method: 'POST', url: '/api/v1/contacts', payload: full })
    expectDocumented(created, '/api/v1/contacts', 'post')
    await t.inject(account, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'second@example.com' } })
    const id = created.json().id
    const sends: Array<[InjectOptions, string, string]> = [
      [{ method: 'GET', url: '/api/v1/me' }, '/api/v1/me', 'get'],
      [{ method: 'GET', url: '/api/v1/contacts?limit=1' }, '/api/v1/contacts', 'get'],
      [{ method: 'GET', url: '/api/v1/events?limit=1' }, '/api/v1/events', 'get'],
      [{ method: 'GET', url: `/api/v1/contacts/${id}` }, '/api/v1/contacts/{id}', 'get'],
      [{ method: 'PATCH', url: `/api/v1/contacts/${id}`, payload: { tags: ['b'] } }, '/api/v1/contacts/{id}', 'patch'],
      [{ method: 'POST', url: '/api/v1/contacts/upsert', payload: full }, '/api/v1/contacts/upsert', 'post'],
      // Problems: 400 with errors[], 404, 409 with existing_id, 401.
      [{ method: 'GET', url: '/api/v1/contacts?limit=0' }, '/api/v1/contacts', 'get'],
      [{ method: 'GET', url: '/api/v1/me?verbose=1' }, '/api/v1/me', 'get'],
      [{ method: 'GET', url: '/api/v1/contacts/con_unknown' }, '/api/v1/contacts/{id}', 'get'],
      [{ method: 'POST', url: '/api/v1/contacts', payload: { email: full.email } }, '/api/v1/contacts', 'post'],
      [{ method: 'GET', url: '/api/v1/contacts/%E0%A4%A' }, '/api/v1/contacts/{id}', 'get'],
    ]
    for (const [request, path, method] of sends) {
      expectDocumented(await t.inject(account, request), path, method)
    }
    expectDocumented(await t.inject(null, { method: 'GET', url: '/api/v1/me' }), '/api/v1/me', 'get')
    expectDocumented(await t.app.inject({ method: 'GET', url: '/healthz' }), '/healthz', 'get')
    expectDocumented(await t.app.inject({ method: 'GET', url: '/readyz?%00' }), '/readyz', 'get')
  })

  it('the documented webhook bodies accept what a delivery sends, in both modes', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    const ajv = new Ajv({ strict: false, validateSchema: false, allErrors: true })
    addFormats(ajv)
    ajv.addSchema(doc, 'openapi.json')
    const account = await t.createAccount()
    for (const as of [account, await t.testMode(account)]) {
      const created = await t.inject(as, { method: 'POST', url: '/api/v1/contacts', payload: full })
      const id = created.json().id
      await t.inject(as, { method: 'PATCH', url: `/api/v1/contacts/${id}`, payload: { tags: ['b'] } })
      await t.inject(as, { method: 'DELETE', url: `/api/v1/contacts/${id}` })
      const { events } = (await t.inject(as, { method: 'GET', url: '/api/v1/events?limit=10' })).json()
      expect(events.map((event: { type: string }) => event.type).sort()).toEqual([
        'contact.created',
        'contact.deleted',
        'contact.updated',
      ])
      for (const event of events) {
        const body = JSON.parse(eventPayload(JSON.stringify(event)))
        const operation = doc.webhooks[event.type].post
        const validate = ajv.compile({
          $ref: `openapi.json#/webhooks/${event.type}/post/requestBody/content/application~1json/schema`,
        })
        expect(operation, event.type).toBeDefined()
        expect(validate(body), `${event.type}: ${JSON.stringify(validate.errors)}`).toBe(true)
      }
    }
  })

  it('serves the reference page at /docs and the error catalogue at /docs/errors', async () => {
    const docs = await t.app.inject({ method: 'GET', url: '/docs' })
    expect([200, 302]).toContain(docs.statusCode)
    const errors = await t.app.inject({ method: 'GET', url: '/docs/errors' })
    expect(errors.statusCode).toBe(200)
    expect(errors.body).toContain('id="invalid_cursor"')
  })

  it('/docs, its assets and the error catalogue carry the security headers (docs/design.md#fair-share)', async () => {
    const urls = [
      '/docs',
      '/docs/',
      '/docs/static/swagger-initializer.js',
      '/docs/static/swagger-ui.css',
      '/docs/static/swagger-ui-bundle.js',
      '/docs/json',
      '/docs/errors',
    ]
    for (const url of urls) {
      const res = await t.app.inject({ method: 'GET', url })
      expect(res.statusCode, url).toBe(200)
      expect(res.headers['x-content-type-options'], url).toBe('nosniff')
      expect(res.headers['x-frame-options'], url).toBe('DENY')
      expect(res.headers['request-id'], url).toMatch(/^req_/)
      const csp = String(res.headers['content-security-policy'])
      expect(csp, url).toContain("frame-ancestors 'none'")
      expect(csp, url).toContain("default-src 'self'")
      expect(csp, url).toContain("object-src 'none'")
      // Swagger UI runs without inline scripts or eval, and without a CDN.
      expect(csp, url).toMatch(/script-src 'self'(;|$)/)
      expect(csp, url).not.toContain('unsafe-')
      // Swagger UI's files may be cached a while; the page (and what names the document) is revalidated.
      const asset = url.startsWith('/docs/static/swagger-ui')
      expect(res.headers['cache-control'], url).toBe(asset ? 'public, max-age=3600' : 'no-cache')
    }
    // The page loads its scripts from this server only.
    const page = await t.app.inject({ method: 'GET', url: '/docs/' })
    expect(page.body).not.toMatch(/<script>|src="https?:/)
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
