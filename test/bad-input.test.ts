// Bad input gets a clear 4xx problem and changes nothing; never a 5xx.
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'
import { createContact, expectProblem, snapshotAccount } from './helpers.js'

describe.each(testDialects())('bad input on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  let existingId: string
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
    existingId = (await createContact(t, acme, { email: 'keep@example.com', tags: ['a'] })).id
  })
  afterAll(() => t.close())

  const json = { 'content-type': 'application/json' }
  const long = 'x'.repeat(257)
  const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`

  // [name, raw body or object, content-type headers, status, code, field named in errors[0]]
  const cases: Array<[string, string | object, Record<string, string>, number, string, string?]> = [
    ['malformed JSON', '{"email": ', json, 400, 'invalid_request'],
    ['empty body with a JSON content type', '', json, 400, 'invalid_request'],
    ['a JSON array', '[{"email":"a@example.com"}]', json, 400, 'invalid_parameter'],
    ['a JSON string', '"a@example.com"', json, 400, 'invalid_parameter'],
    ['JSON null', 'null', json, 400, 'invalid_parameter'],
    ['a JSON number', '42', json, 400, 'invalid_parameter'],
    ['nested 100,000 levels deep', deep, json, 400, 'invalid_parameter'],
    ['unknown field', { email: 'n@example.com', isAdmin: true }, json, 400, 'invalid_parameter', 'isAdmin'],
    ['read-only id', { email: 'n@example.com', id: 'con_x' }, json, 400, 'invalid_parameter', 'id'],
    [
      'read-only created_at',
      { email: 'n@example.com', created_at: '2020-01-01T00:00:00.000Z' },
      json,
      400,
      'invalid_parameter',
      'created_at',
    ],
    [
      'read-only account_id',
      { email: 'n@example.com', account_id: 'acct_x' },
      json,
      400,
      'invalid_parameter',
      'account_id',
    ],
    ['__proto__', '{"email":"n@example.com","__proto__":{"admin":true}}', json, 400, 'invalid_request'],
    [
      'constructor.prototype',
      '{"email":"n@example.com","constructor":{"prototype":{"admin":true}}}',
      json,
      400,
      'invalid_request',
    ],
    ['U+0000 in a value', { email: 'n@example.com', first_name: 'A\u0000B' }, json, 400, 'invalid_parameter'],
    [
      'U+0000 in a custom field',
      { email: 'n@example.com', custom_fields: { note: '\u0000' } },
      json,
      400,
      'invalid_parameter',
    ],
    ['invalid email', { email: 'not-an-email' }, json, 400, 'invalid_parameter', 'email'],
    ['an email starting with a dot', { email: '.a@example.com' }, json, 400, 'invalid_parameter', 'email'],
    ['a 65-character local part', { email: `${'a'.repeat(65)}@example.com` }, json, 400, 'invalid_parameter', 'email'],
    ['a blank first_name', { first_name: '   ' }, json, 400, 'invalid_parameter', 'first_name'],
    ['a blank tag', { first_name: 'T', tags: [' \t'] }, json, 400, 'invalid_parameter', 'tags.0'],
    ['bytes that are not UTF-8', Buffer.from('{"first_name":"Ren\xe9"}', 'latin1'), json, 400, 'invalid_request'],
    [
      'a charset other than UTF-8',
      '{"first_name":"Rene"}',
      { 'content-type': 'application/json; charset=iso-8859-1' },
      415,
      'unsupported_media_type',
    ],
    ['email with spaces inside', { email: 'a b@example.com' }, json, 400, 'invalid_parameter', 'email'],
    ['invalid phone', { phone: '12345' }, json, 400, 'invalid_parameter', 'phone'],
    ['over-long first_name', { first_name: long }, json, 400, 'invalid_parameter', 'first_name'],
    ['over-long email', { email: `${long}@example.com` }, json, 400, 'invalid_parameter', 'email'],
    ['empty first_name', { first_name: '' }, json, 400, 'invalid_parameter', 'first_name'],
    [
      '51 tags',
      { first_name: 'T', tags: Array.from({ length: 51 }, (_, i) => `t${i}`) },
      json,
      400,
      'invalid_parameter',
      'tags',
    ],
    ['a 65-character tag', { first_name: 'T', tags: ['x'.repeat(65)] }, json, 400, 'invalid_parameter', 'tags.0'],
    ['an empty tag', { first_name: 'T', tags: [''] }, json, 400, 'invalid_parameter', 'tags.0'],
    [
      '51 custom fields',
      { first_name: 'T', custom_fields: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) },
      json,
      400,
      'invalid_parameter',
      'custom_fields',
    ],
    [
      'a bad custom field key',
      { first_name: 'T', custom_fields: { 'bad-key': 1 } },
      json,
      400,
      'invalid_parameter',
      'custom_fields.bad-key',
    ],
    [
      'a 41-character custom field key',
      { first_name: 'T', custom_fields: { ['k'.repeat(41)]: 1 } },
      json,
      400,
      'invalid_parameter',
      `custom_fields.${'k'.repeat(41)}`,
    ],
    [
      'a 501-character custom value',
      { first_name: 'T', custom_fields: { note: 'x'.repeat(501) } },
      json,
      400,
      'invalid_parameter',
    ],
    [
      'an object as custom value',
      { first_name: 'T', custom_fields: { nested: { a: 1 } } },
      json,
      400,
      'invalid_parameter',
    ],
    ['an array as custom value', { first_name: 'T', custom_fields: { list: [1] } }, json, 400, 'invalid_parameter'],
    ['a number as name', { first_name: 123 }, json, 400, 'invalid_parameter', 'first_name'],
    ['an array as name', { first_name: ['a'] }, json, 400, 'invalid_parameter', 'first_name'],
    ['an operator object as name', { first_name: { $gt: '' } }, json, 400, 'invalid_parameter', 'first_name'],
    ['a string as tags', { first_name: 'T', tags: 'vip' }, json, 400, 'invalid_parameter', 'tags'],
    ['a boolean as email', { email: true }, json, 400, 'invalid_parameter', 'email'],
    [
      'a number too large for a double',
      '{"first_name":"T","custom_fields":{"x":1e400}}',
      json,
      400,
      'invalid_parameter',
    ],
    ['lone surrogates in tags', '{"first_name":"T","tags":["\\ud800","\\udc00"]}', json, 400, 'invalid_parameter'],
    ['a lone surrogate in an email', '{"email":"\\ud800@example.com"}', json, 400, 'invalid_parameter'],
    ['a phone extension', { phone: '+1 650 253 0000 ext. 123' }, json, 400, 'invalid_parameter', 'phone'],
    [
      'a 2 MiB body',
      { first_name: 'T', custom_fields: { note: 'x'.repeat(2 * 1024 * 1024) } },
      json,
      413,
      'payload_too_large',
    ],
    [
      'form encoding',
      'email=a%40example.com',
      { 'content-type': 'application/x-www-form-urlencoded' },
      415,
      'unsupported_media_type',
    ],
    [
      'XML',
      '<contact><email>a@example.com</email></contact>',
      { 'content-type': 'application/xml' },
      415,
      'unsupported_media_type',
    ],
    ['text/plain', '{"email":"a@example.com"}', { 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
    [
      'a gzip-compressed body (Content-Encoding: gzip)',
      gzipSync('{"email":"gz@example.com"}'),
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      415,
      'unsupported_media_type',
    ],
    ['no body at all', '', {}, 400, 'invalid_parameter'],
  ]

  it.each(cases)(
    'POST /contacts with %s → %i %s, nothing written',
    async (_name, payload, headers, status, code, field) => {
      const before = await snapshotAccount(t, acme)
      const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload, headers })
      const body = expectProblem(res, status, code)
      if (field) {
        expect(body.errors[0].field).toBe(field)
      }
      expect(await snapshotAccount(t, acme)).toEqual(before)
    },
  )

  it.each(cases)(
    'PATCH /contacts/{id} with %s → %i %s, nothing changed',
    async (_name, payload, headers, status, code) => {
      const before = await snapshotAccount(t, acme)
      const res = await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${existingId}`, payload, headers })
      expectProblem(res, status, code)
      expect(await snapshotAccount(t, acme)).toEqual(before)
    },
  )

  it('upsert refuses the same bad bodies', async () => {
    const before = await snapshotAccount(t, acme)
    for (const [name, payload, headers, status, code] of cases) {
      const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts/upsert', payload, headers })
      expect(res.statusCode, name).toBeGreaterThanOrEqual(400)
      expect(res.statusCode, name).toBeLessThan(500)
      if (status !== 400 || code !== 'invalid_parameter') {
        expectProblem(res, status, code)
      }
    }
    expect(await snapshotAccount(t, acme)).toEqual(before)
  })

  it('a compressed body is 415 with Accept-Encoding: identity (RFC 9110 §15.5.16), whatever the coding', async () => {
    for (const coding of ['gzip', 'br', 'deflate, gzip']) {
      const res = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: gzipSync('{"email":"gz@example.com"}'),
        headers: { ...json, 'content-encoding': coding },
      })
      expectProblem(res, 415, 'unsupported_media_type')
      expect(res.headers['accept-encoding'], coding).toBe('identity')
    }
    // The web app's forms and uploads alike: no parser decodes a coding.
    for (const [url, type] of [
      ['/sign-up', 'application/x-www-form-urlencoded'],
      ['/sign-in', 'multipart/form-data; boundary=x'],
    ]) {
      const res = await t.app.inject({
        method: 'POST',
        url,
        payload: gzipSync('email=gz%40example.com'),
        headers: { 'content-type': type as string, 'content-encoding': 'gzip' },
      })
      expect(res.statusCode, `${url} ${res.body.slice(0, 200)}`).toBe(415)
      expect(res.headers['accept-encoding']).toBe('identity')
    }
    // identity is no coding at all.
    const plain = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'identity@example.com' },
      headers: { 'content-encoding': 'identity' },
    })
    expect(plain.statusCode, plain.body).toBe(201)
  })

  it('a __proto__ key is refused as such, not as invalid JSON', async () => {
    const res = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: '{"first_name":"T","__proto__":{"admin":true}}',
      headers: json,
    })
    expect(expectProblem(res, 400, 'invalid_request').detail).toBe(
      'The request body has a "__proto__" or "constructor" key, which is refused.',
    )
  })

  it.each(['/api/v1/contacts?q=a%00b', '/api/v1/contacts?email=a%00@example.com', `/api/v1/contacts/con_%00`])(
    'U+0000 in the URL (%s) → 400, on every dialect',
    async (url) => {
      expectProblem(await t.inject(acme, { method: 'GET', url }), 400, 'invalid_parameter')
    },
  )

  it.each([
    ['a leap second', '2016-12-31T23:59:60Z'],
    ['a leap second with an offset', '2016-12-31T00:59:60%2B01:00'],
    ['no time zone', '2026-01-01T00:00:00'],
    ['a date only', '2026-01-01'],
  ])('updated_after with %s → 400, never 500', async (_name, value) => {
    const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?updated_after=${value}` })
    expect(expectProblem(res, 400, 'invalid_parameter').errors[0].field).toBe('updated_after')
  })

  it('updated_after longer than 256 characters → 400, like the other text filters', async () => {
    const value = `${'2026-01-01T00:00:00.'.padEnd(255, '0')}Z`
    expect((await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?updated_after=${value}` })).statusCode).toBe(
      200,
    )
    const res = await t.inject(acme, {
      method: 'GET',
      url: `/api/v1/contacts?updated_after=${value.replace('Z', '0Z')}`,
    })
    expect(expectProblem(res, 400, 'invalid_parameter').errors[0].field).toBe('updated_after')
  })

  it.each([
    ['GET', '/api/v1/me'],
    ['POST', '/api/v1/contacts'],
    ['POST', '/api/v1/contacts/upsert'],
    ['GET', '/api/v1/contacts/{id}'],
    ['PATCH', '/api/v1/contacts/{id}'],
    ['DELETE', '/api/v1/contacts/{id}'],
  ])('an unknown query parameter on %s %s → 400 naming it, nothing written', async (method, path) => {
    const before = await snapshotAccount(t, acme)
    const url = `${path.replace('{id}', existingId)}?dry_run=true`
    const payload = method === 'GET' || method === 'DELETE' ? undefined : { email: 'query@example.com' }
    const res = await t.inject(acme, { method: method as 'GET', url, ...(payload ? { payload } : {}) })
    expect(expectProblem(res, 400, 'invalid_parameter').errors).toEqual([
      { field: 'dry_run', message: 'is not a known field' },
    ])
    expect(await snapshotAccount(t, acme)).toEqual(before)
  })

  // [method, path, body, the one field error]: a value that fails Nullable(X) reports X's error, not
  // "must be null" and "must match a schema in anyOf" as well.
  const oneErrorPerField: Array<[string, string, object, string, string]> = [
    ['POST', '/api/v1/contacts', { first_name: '' }, 'first_name', 'must not be empty'],
    ['POST', '/api/v1/contacts', { last_name: 'x'.repeat(257) }, 'last_name', 'must be at most 256 characters'],
    ['POST', '/api/v1/contacts', { email: 5 }, 'email', 'must be a string or null'],
    ['POST', '/api/v1/contacts', { tags: 'vip' }, 'tags', 'must be an array or null'],
    ['POST', '/api/v1/contacts', { tags: ['ok', ''] }, 'tags.1', 'must not be empty'],
    [
      'POST',
      '/api/v1/contacts',
      { custom_fields: { plan: ['pro'] } },
      'custom_fields.plan',
      'must be a string, a number, a boolean or null',
    ],
    [
      'POST',
      '/api/v1/contacts',
      { custom_fields: { plan: 'p'.repeat(501) } },
      'custom_fields.plan',
      'must be at most 500 characters',
    ],
    [
      'POST',
      '/api/v1/contacts',
      { custom_fields: { 'bad key': 1 } },
      'custom_fields.bad key',
      'is not a valid custom field key: use 1-40 letters, digits or underscores',
    ],
    ['POST', '/api/v1/contacts', { custom_fields: 'plan' }, 'custom_fields', 'must be an object or null'],
    ['POST', '/api/v1/contacts/upsert', { first_name: 'Ada' }, 'email', 'is required'],
    ['PATCH', '/api/v1/contacts/{id}', { company: '' }, 'company', 'must not be empty'],
    [
      'PATCH',
      '/api/v1/contacts/{id}',
      { custom_fields: { seats: { n: 1 } } },
      'custom_fields.seats',
      'must be a string, a number, a boolean or null',
    ],
    ['POST', '/api/v1/webhook_endpoints', { url: '' }, 'url', 'must not be empty'],
    [
      'POST',
      '/api/v1/webhook_endpoints',
      { url: 'https://hooks.example.com/a', description: 5 },
      'description',
      'must be a string or null',
    ],
    [
      'POST',
      '/api/v1/webhook_endpoints',
      { url: 'https://hooks.example.com/a', events: ['contact.merged'] },
      'events.0',
      'must be one of *, contact.created, contact.updated, contact.deleted, api_key.exposed',
    ],
    [
      'POST',
      '/api/v1/webhook_endpoints',
      { url: 'https://hooks.example.com/a', events: [] },
      'events',
      'must have at least 1 item',
    ],
  ]
  it.each(oneErrorPerField)(
    '%s %s %j → one error, for the bad field only',
    async (method, path, payload, field, message) => {
      const url = path.replace('{id}', existingId)
      const res = await t.inject(acme, { method: method as 'POST', url, payload })
      const body = expectProblem(res, 400, 'invalid_parameter')
      expect(body.errors).toEqual([{ field, message }])
      expect(body.detail).toBe(`${field} ${message}`)
    },
  )

  it.each([
    ['/api/v1/contacts?order=newest', 'order', 'must be one of asc, desc'],
    [
      '/api/v1/events?type=contact.merged',
      'type',
      'must be one of contact.created, contact.updated, contact.deleted, api_key.exposed',
    ],
    [
      '/api/v1/contacts?updated_after=yesterday',
      'updated_after',
      'must be an RFC 3339 date-time, e.g. 2026-01-31T09:00:00Z',
    ],
    // A year before 0000 is no RFC 3339 year (one past 9999 is written by toISOString, and kept).
    [
      '/api/v1/request_logs?created_after=-000001-01-01T00:00:00Z',
      'created_after',
      'must be an RFC 3339 date-time, e.g. 2026-01-31T09:00:00Z',
    ],
    // Paths are logged from their leading slash: one without it could never match.
    ['/api/v1/request_logs?path=api/v1/me', 'path', 'must start with /'],
  ])('GET %s → one error naming the choices or the format', async (url, field, message) => {
    const body = expectProblem(await t.inject(acme, { method: 'GET', url }), 400, 'invalid_parameter')
    expect(body.errors).toEqual([{ field, message }])
    expect(body.detail).toBe(`${field} ${message}`)
  })

  it('a problem never echoes more than it documents: detail ≤ 1024 and each field error ≤ 256 characters', async () => {
    const name = 'k'.repeat(5000)
    const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { [name]: 1 } })
    const body = expectProblem(res, 400, 'invalid_parameter')
    expect(body.detail).toBe(`${'k'.repeat(1023)}…`)
    expect(body.errors).toEqual([{ field: `${'k'.repeat(255)}…`, message: 'is not a known field' }])
    const url = `/api/v1/contacts/%E0%A4%A${'x'.repeat(3000)}`
    expect(expectProblem(await t.inject(acme, { method: 'GET', url }), 400, 'invalid_request').detail).toHaveLength(
      1024,
    )
  })

  it('a badly percent-encoded URL is a 400 problem with a Request-Id', async () => {
    const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts/%E0%A4%A' })
    const body = expectProblem(res, 400, 'invalid_request')
    expect(JSON.stringify(body)).not.toContain('FST_')
  })

  it('a very long or malformed id is a 404 like an unknown one', async () => {
    for (const id of ['x'.repeat(300), 'con_', '..%2F..%2Fetc']) {
      expectProblem(await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${id}` }), 404, 'not_found')
    }
  })

  it('DELETE with Content-Type: application/json and no body still deletes (204)', async () => {
    const victim = await createContact(t, acme, { first_name: 'Delete me' })
    const res = await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${victim.id}`, headers: json })
    expect(res.statusCode).toBe(204)
  })

  it('the process keeps serving after all of the above', async () => {
    expect((await t.inject(acme, { method: 'GET', url: '/api/v1/me' })).statusCode).toBe(200)
  })
})
