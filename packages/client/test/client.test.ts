// The SDK against the real server over HTTP, on every dialect: the app from the test harness
// listening on a free port, and the SDK's requests going through the real fetch.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { listBounds } from '../../../src/contacts/contacts.list-query.js'
import { testDialects } from '../../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../../test/harness.js'
import { listVersionSettled } from '../../../test/helpers.js'
import { staticResolver } from '../../../test/static-resolver.js'
import {
  ApiError,
  type AttemptInfo,
  type Conditional,
  type Contact,
  type ContactPage,
  createClient,
  type Event,
  etagOf,
  type FetchLike,
  type LastResponse,
  lastResponseOf,
  type RetryInfo,
  USER_AGENT,
  VERSION,
  type WithLastResponse,
} from '../src/index.js'

async function listen(harness: TestHarness): Promise<string> {
  await harness.app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(harness.app.server.address() as AddressInfo).port}`
}

/** The global fetch, with every request and response it sees written down. */
function recordingFetch(): { fetch: FetchLike; requests: Request[]; statuses: number[]; requestIds: string[] } {
  const requests: Request[] = []
  const statuses: number[] = []
  const requestIds: string[] = []
  return {
    requests,
    statuses,
    requestIds,
    fetch: async (request) => {
      requests.push(request.clone())
      const response = await fetch(request)
      statuses.push(response.status)
      requestIds.push(response.headers.get('request-id') ?? '')
      return response
    },
  }
}

const resolve = staticResolver({ 'hooks.example.com': ['93.184.216.34'] })

describe.each(testDialects())('SDK against the server on %s', (dialect) => {
  let t: TestHarness
  let base: string
  let acme: TestAccount
  beforeAll(async () => {
    t = await createTestHarness({ dialect, resolve })
    base = await listen(t)
    acme = await t.createAccount('Acme')
  })
  afterAll(() => t.close())

  const client = (options: Partial<Parameters<typeof createClient>[0]> = {}) =>
    createClient({ baseUrl: base, apiKey: acme.key, retryBaseDelayMs: 10, ...options })

  it('walks a search through the short and empty pages of a bounded scan, every match once', async () => {
    const sdk = client()
    const made: string[] = []
    for (let i = 0; i < 12; i++) {
      const contact = await sdk.contacts.create({ first_name: i % 4 === 0 ? `Walker${i}` : `Other${i}` })
      if (i % 4 === 0) {
        made.push(contact.id)
      }
    }
    const bounds = { ...listBounds }
    // Lowered (the real ones are 500 and 1,000): pages of 3 scanned contacts, most of them empty.
    Object.assign(listBounds, { indexedMax: 0, scanMax: 3 })
    try {
      const first = await sdk.contacts.list({ q: 'walker', limit: 10 })
      expect(first.contacts.length).toBeLessThan(made.length)
      expect(first.next_cursor).not.toBeNull()
      const walked: string[] = []
      for await (const contact of sdk.contacts.all({ q: 'walker', limit: 10 })) {
        walked.push(contact.id)
      }
      expect(walked.sort()).toEqual([...made].sort())
    } finally {
      Object.assign(listBounds, bounds)
    }
  })

  it('reads the account, creates, gets, updates, upserts and deletes a contact', async () => {
    const sdk = client()
    expect(await sdk.me()).toMatchObject({ object: 'account', id: acme.id, name: 'Acme' })
    const created = await sdk.contacts.create({ email: 'ada@example.com', first_name: 'Ada', tags: ['vip'] })
    expect(created).toMatchObject({ object: 'contact', email: 'ada@example.com', tags: ['vip'] })
    expect(await sdk.contacts.get(created.id)).toEqual(created)
    const updated = await sdk.contacts.update(created.id, { last_name: 'Lovelace', custom_fields: { plan: 'pro' } })
    expect(updated).toMatchObject({ first_name: 'Ada', last_name: 'Lovelace', custom_fields: { plan: 'pro' } })
    const upserted = await sdk.contacts.upsert({ email: 'ADA@example.com', company: 'Analytical Engines' })
    expect(upserted).toMatchObject({ created: false, contact: { id: created.id, company: 'Analytical Engines' } })
    const fresh = await sdk.contacts.upsert({ email: 'grace@example.com' })
    expect(fresh.created).toBe(true)
    await sdk.contacts.delete(created.id)
    await sdk.contacts.delete(fresh.contact.id)
    await expect(sdk.contacts.get(created.id)).rejects.toMatchObject({ status: 404, code: 'not_found' })
  })

  it('sends a batch and narrows each result by its status', async () => {
    const sdk = client()
    const kept = await sdk.contacts.create({ email: 'batch-kept@example.com' })
    const { results } = await sdk.contacts.batch({
      operations: [
        { op: 'create', contact: { email: 'batch-new@example.com', first_name: 'New' } },
        { op: 'create', contact: { email: 'BATCH-kept@example.com' } },
        { op: 'update', id: kept.id, contact: { company: 'Acme' } },
        { op: 'delete', id: kept.id },
      ],
    })
    const seen = results.map((result) => {
      if ('problem' in result) {
        return [result.status, result.problem.code, result.problem.existing_id]
      }
      return result.status === 204 ? [204] : [result.status, result.contact.email]
    })
    expect(seen).toEqual([
      [201, 'batch-new@example.com'],
      [409, 'contact_exists', kept.id],
      [200, 'batch-kept@example.com'],
      [204],
    ])
  })

  it('lists a page and walks every page with for await, filters kept', async () => {
    const sdk = client()
    for (let i = 0; i < 7; i++) {
      await sdk.contacts.create({ email: `walk${i}@example.com`, tags: i % 2 === 0 ? ['even'] : ['odd'] })
    }
    const page = await sdk.contacts.list({ tag: 'even', limit: 2 })
    expect(page.contacts.map((c) => c.email)).toEqual(['walk0@example.com', 'walk2@example.com'])
    expect(page.next_cursor).toEqual(expect.any(String))
    // No arguments at all: the server's defaults.
    expect((await sdk.contacts.list()).contacts.length).toBeGreaterThanOrEqual(7)
    const seen: Contact[] = []
    for await (const contact of sdk.contacts.all({ tag: 'even', limit: 1 })) {
      seen.push(contact)
    }
    expect(seen.map((c) => c.email)).toEqual([0, 2, 4, 6].map((i) => `walk${i}@example.com`))
    // On the PostgreSQL server the feed serves an event once every older transaction has ended
    // (another suite's too): a moment's lag, never a gap, so read again until the events are in.
    let events: Event[] = []
    for (const deadline = Date.now() + 10_000; ; ) {
      events = []
      for await (const event of sdk.events.all({ limit: 3 })) {
        events.push(event)
      }
      if (events.filter((e) => e.type === 'contact.created').length >= 7 || Date.now() > deadline) {
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(events.filter((e) => e.type === 'contact.created').length).toBeGreaterThanOrEqual(7)
    expect(await sdk.events.get(events[0]?.id ?? '')).toEqual(events[0])
  })

  it('puts the response beside each result: status, headers, Request-Id, replayed', async () => {
    const recorder = recordingFetch()
    const sdk = client({ fetch: recorder.fetch })
    const created = await sdk.contacts.create({ email: 'answer@example.com' }, { idempotencyKey: 'answer-1' })
    // Typed on the result itself: no cast, no lookup.
    expectTypeOf(created.lastResponse).toEqualTypeOf<LastResponse>()
    expect(created.lastResponse).toMatchObject({ statusCode: 201, idempotentReplayed: false })
    expect(created.lastResponse.requestId).toMatch(/^req_/)
    expect(created.lastResponse.requestId).toBe(recorder.requestIds.at(-1))
    expect(created.lastResponse.headers).toBeInstanceOf(Headers)
    expect(lastResponseOf(created)).toBe(created.lastResponse)
    // Beside the object, not in it: the contact is exactly the API's JSON.
    expect(Object.keys(created)).not.toContain('lastResponse')
    expect(JSON.stringify(created)).not.toContain('lastResponse')
    expect({ ...created }).toEqual(created)

    const replay = await sdk.contacts.create({ email: 'answer@example.com' }, { idempotencyKey: 'answer-1' })
    expect(replay.lastResponse).toMatchObject({ statusCode: 201, idempotentReplayed: true })
    expect(replay.lastResponse.requestId).toBe(recorder.requestIds.at(-1))
    expect(replay.lastResponse.requestId).not.toBe(created.lastResponse.requestId)
    expect(replay).toEqual(created)

    const got = await sdk.contacts.get(created.id)
    expect(got.lastResponse).toMatchObject({ statusCode: 200, idempotentReplayed: false })
    expect(got.lastResponse.requestId).toBe(recorder.requestIds.at(-1))
    // The id is the one the request log knows the request by.
    expect(await sdk.requestLogs.get(got.lastResponse.requestId ?? '')).toMatchObject({
      route: '/api/v1/contacts/{id}',
      status: 200,
    })

    const page = await sdk.contacts.list({ limit: 1 })
    expect(page.lastResponse.statusCode).toBe(200)
    expect(page.lastResponse.requestId).toBe(recorder.requestIds.at(-1))
    expect(page.lastResponse.headers.get('content-type')).toContain('application/json')
    expect(page.lastResponse.headers.get('request-id')).toBe(page.lastResponse.requestId)
    expect(Object.keys(page)).not.toContain('lastResponse')
    // An item of a walk carries the answer of the page it came in.
    for await (const contact of sdk.contacts.all({ limit: 1 })) {
      expect(contact.lastResponse.requestId).toBe(recorder.requestIds.at(-1))
      break
    }

    const account = await sdk.me()
    expect(account.lastResponse.statusCode).toBe(200)
    const upserted = await sdk.contacts.upsert({ email: 'answer@example.com', first_name: 'Answer' })
    expect(upserted.lastResponse).toBe(upserted.contact.lastResponse)
    expect(upserted.lastResponse.statusCode).toBe(200)
    // A 304 has no body: the `{ notModified }` answer carries the response.
    const unchanged = await sdk.contacts.get(created.id, { ifNoneMatch: etagOf(upserted.contact) })
    expect(unchanged).toEqual({ notModified: true, etag: etagOf(upserted.contact) })
    expect(unchanged.lastResponse).toMatchObject({ statusCode: 304, requestId: recorder.requestIds.at(-1) })
  })

  it('sends an Idempotency-Key on every POST: the server replays the answer to the same key', async () => {
    const recorder = recordingFetch()
    const sdk = client({ fetch: recorder.fetch })
    const created = await sdk.contacts.create({ email: 'idem@example.com' })
    const key = recorder.requests[0]?.headers.get('idempotency-key')
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    // The same key and body sent by hand: the server saw and stored the SDK's key.
    const replay = await fetch(`${base}/api/v1/contacts`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${acme.key}`,
        'content-type': 'application/json',
        'idempotency-key': key ?? '',
      },
      body: JSON.stringify({ email: 'idem@example.com' }),
    })
    expect(replay.status).toBe(201)
    expect(replay.headers.get('idempotent-replayed')).toBe('true')
    expect(((await replay.json()) as Contact).id).toBe(created.id)
    // A key of the caller's choosing replaces the random one.
    const again = await sdk.contacts.create({ email: 'idem@example.com' }, { idempotencyKey: key ?? '' })
    expect(again.id).toBe(created.id)
    expect(recorder.requests[1]?.headers.get('idempotency-key')).toBe(key)
    // GETs carry none.
    await sdk.contacts.get(created.id)
    expect(recorder.requests[2]?.headers.has('idempotency-key')).toBe(false)
  })

  it('conditional requests: etagOf, ifNoneMatch → notModified, ifMatch → precondition_failed', async () => {
    const owner = await t.createAccount('Conditional')
    const sdk = createClient({ baseUrl: base, apiKey: owner.key, retryBaseDelayMs: 10 })
    const created = await sdk.contacts.create({ email: 'sync@example.com' })
    const tag = etagOf(created)
    expect(tag).toMatch(/^"[\w-]{22}"$/)
    const read = await sdk.contacts.get(created.id)
    expect(etagOf(read)).toBe(tag)
    // The ETag lives beside the contact: the object is still exactly the API's JSON.
    expect(Object.keys(read)).toEqual(Object.keys(created))

    // Typed by the options: a plain read is the contact, a conditional one a Conditional.
    expectTypeOf(sdk.contacts.get(created.id)).resolves.toEqualTypeOf<WithLastResponse<Contact>>()
    expectTypeOf(sdk.contacts.get(created.id, { ifNoneMatch: tag })).resolves.toEqualTypeOf<Conditional<Contact>>()
    expectTypeOf(sdk.contacts.list({}, { ifNoneMatch: tag })).resolves.toEqualTypeOf<Conditional<ContactPage>>()
    const unchanged = await sdk.contacts.get(created.id, { ifNoneMatch: tag })
    expect(unchanged).toEqual({ notModified: true, etag: tag })
    const updated = await sdk.contacts.update(created.id, { first_name: 'Sync' }, { ifMatch: etagOf(read) })
    expect(etagOf(updated)).not.toBe(tag)
    const changed = await sdk.contacts.get(created.id, { ifNoneMatch: tag })
    if (changed.notModified) {
      throw new Error('expected the changed contact')
    }
    expect(changed.data).toEqual(updated)
    expect(changed.etag).toBe(etagOf(updated))
    expect(etagOf(changed.data)).toBe(changed.etag)

    // The first writer holding `read` won; a second one holding the same version is refused.
    const stale = await sdk.contacts
      .update(created.id, { first_name: 'Lost' }, { ifMatch: tag })
      .catch((e: unknown) => e)
    expect(stale).toBeInstanceOf(ApiError)
    expect(stale).toMatchObject({ status: 412, code: 'precondition_failed' })
    await expect(sdk.contacts.delete(created.id, { ifMatch: tag })).rejects.toMatchObject({
      code: 'precondition_failed',
    })
    expect((await sdk.contacts.get(created.id)).first_name).toBe('Sync')

    // Polling a page: nothing held yet (undefined) reads it with its tag; then 304s until a change.
    await listVersionSettled(t, owner)
    const first = await sdk.contacts.list({ limit: 10 }, { ifNoneMatch: undefined })
    if (first.notModified) {
      throw new Error('expected a page')
    }
    expect(first.data.contacts.map((c) => c.id)).toEqual([created.id])
    expect(await sdk.contacts.list({ limit: 10 }, { ifNoneMatch: first.etag })).toEqual({
      notModified: true,
      etag: first.etag,
    })
    await sdk.contacts.delete(created.id, { ifMatch: etagOf(updated) })
    await listVersionSettled(t, owner)
    const after = await sdk.contacts.list({ limit: 10 }, { ifNoneMatch: first.etag })
    expect(after).toMatchObject({ notModified: false, data: { contacts: [], next_cursor: null } })
    // A plain list remembers its page's tag too.
    expect(etagOf(await sdk.contacts.list({ limit: 10 }))).toBe(after.etag)
  })

  it('throws a typed ApiError on 400, 401, 404 and 409', async () => {
    const sdk = client()
    const invalid = await sdk.contacts.list({ limit: 1000 }).catch((error: unknown) => error)
    expect(invalid).toBeInstanceOf(ApiError)
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_parameter', requestId: expect.stringMatching(/^req_/) })
    expect((invalid as ApiError).fieldErrors.map((e) => e.field)).toContain('limit')
    expect((invalid as ApiError).detail).toEqual(expect.any(String))

    const unauthorized = await createClient({ baseUrl: base, apiKey: 'service_live_nope' })
      .me()
      .catch((error: unknown) => error)
    expect(unauthorized).toBeInstanceOf(ApiError)
    expect(unauthorized).toMatchObject({ status: 401, code: 'invalid_api_key' })
    expect((unauthorized as ApiError).headers.get('www-authenticate')).toContain('Bearer')

    const missing = await sdk.contacts.get('con_01JAAAAAAAAAAAAAAAAAAAAAAA').catch((error: unknown) => error)
    expect(missing).toMatchObject({ name: 'ApiError', status: 404, code: 'not_found' })

    const first = await sdk.contacts.create({ email: 'taken@example.com' })
    const taken = await sdk.contacts.create({ email: 'taken@example.com' }).catch((error: unknown) => error)
    expect(taken).toMatchObject({ status: 409, code: 'contact_exists' })
    expect((taken as ApiError).problem.existing_id).toBe(first.id)
    expect((taken as ApiError).requestId).toBe((taken as ApiError).headers.get('request-id'))
  })

  it('retries a 503 and a lost connection with the same Idempotency-Key, and the server creates one contact', async () => {
    // A proxy in front of the server: the first POST gets a 503 with Retry-After, the second is
    // forwarded and its connection cut before the answer (the server did the work), the third passes.
    const plan: Array<'503' | 'cut'> = ['503', 'cut']
    const seen: Array<{ key: string | undefined; outcome: string }> = []
    const proxy = createServer(async (req, res) => {
      const chunks: Buffer[] = []
      for await (const chunk of req) {
        chunks.push(chunk as Buffer)
      }
      const step = req.method === 'POST' ? plan.shift() : undefined
      seen.push({ key: req.headers['idempotency-key'] as string | undefined, outcome: step ?? 'pass' })
      if (step === '503') {
        res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' })
        res.end(JSON.stringify({ code: 'service_unavailable', status: 503, title: 'Service unavailable' }))
        return
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name)),
      ) as Record<string, string>
      const upstream = await fetch(`${base}${req.url}`, {
        method: req.method ?? 'GET',
        headers,
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      })
      const body = Buffer.from(await upstream.arrayBuffer())
      if (step === 'cut') {
        req.socket.destroy()
        return
      }
      res.writeHead(upstream.status, Object.fromEntries(upstream.headers))
      res.end(body)
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    try {
      const sdk = client({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` })
      const started = Date.now()
      const created = await sdk.contacts.create({ email: 'flaky@example.com' })
      expect(Date.now() - started).toBeGreaterThanOrEqual(900) // Retry-After: 1
      expect(seen.map((s) => s.outcome)).toEqual(['503', 'cut', 'pass'])
      expect(new Set(seen.map((s) => s.key)).size).toBe(1)
      expect(seen[0]?.key).toEqual(expect.any(String))
      const { contacts } = await sdk.contacts.list({ email: 'flaky@example.com' })
      expect(contacts.map((c) => c.id)).toEqual([created.id])
    } finally {
      proxy.closeAllConnections()
      await new Promise((resolve) => proxy.close(resolve))
    }
  })

  it('gives up after maxRetries and throws the last answer', async () => {
    let calls = 0
    const down: FetchLike = async () => {
      calls++
      return new Response(JSON.stringify({ code: 'service_unavailable', status: 503, detail: 'down' }), {
        status: 503,
        headers: { 'content-type': 'application/problem+json', 'request-id': 'req_x' },
      })
    }
    const error = await client({ fetch: down, maxRetries: 2 })
      .me()
      .catch((e: unknown) => e)
    expect(calls).toBe(3)
    expect(error).toMatchObject({ status: 503, code: 'service_unavailable', requestId: 'req_x', detail: 'down' })
  })

  it('reads the request log: a page, every page with for await, one entry by Request-Id', async () => {
    const owner = await t.createAccount('Logged')
    const sdk = createClient({ baseUrl: base, apiKey: owner.key, retryBaseDelayMs: 10 })
    await sdk.me()
    const missing = await sdk.contacts.get('con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A').catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ApiError)
    const page = await sdk.requestLogs.list({ status: '4xx' })
    expect(page.request_logs).toHaveLength(1)
    expect(page.request_logs[0]).toMatchObject({
      id: (missing as ApiError).requestId,
      route: '/api/v1/contacts/{id}',
      status: 404,
      error_code: 'not_found',
      user_agent: USER_AGENT,
    })
    const walked = []
    for await (const entry of sdk.requestLogs.all({ limit: 1 })) {
      walked.push(entry.route)
    }
    // The list itself came after the 404 and the /me: newest first.
    expect(walked).toEqual(['/api/v1/request_logs', '/api/v1/contacts/{id}', '/api/v1/me'])
    expect(await sdk.requestLogs.get((missing as ApiError).requestId ?? '')).toEqual(page.request_logs[0])
    // A caller's own User-Agent replaces the client's, whatever its case.
    const named = createClient({ baseUrl: base, apiKey: owner.key, headers: { 'User-Agent': 'sync-job/2' } })
    await named.me()
    const [latest] = (await named.requestLogs.list({ limit: 1, path: '/api/v1/me' })).request_logs
    expect(latest?.user_agent).toBe('sync-job/2')
  })

  it('sends the version of its package in its User-Agent', () => {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string
    }
    expect(VERSION).toBe(manifest.version)
    expect(USER_AGENT).toBe(`contacts-api-client/${manifest.version}`)
  })

  it('follows the events feed from now, long-polling at its end, and resumes from its cursor', async () => {
    const owner = await t.createAccount('Follower')
    const sdk = createClient({ baseUrl: base, apiKey: owner.key, retryBaseDelayMs: 10 })
    await sdk.contacts.create({ first_name: 'Before' })
    // from=now starts where the feed ends as served: on the PostgreSQL server another suite's open
    // transaction can hold an event committed just now behind that end, so wait until it is served.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
      if ((await sdk.events.list({ limit: 100 })).events.length > 0) {
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const stop = new AbortController()
    const follower = sdk.events.follow({ limit: 2, wait: 5, signal: stop.signal })
    const seen: string[] = []
    const reading = (async () => {
      for await (const event of follower) {
        seen.push((event.data.object as { first_name: string }).first_name)
        if (seen.length === 3) {
          break
        }
      }
    })()
    // Created while the follower waits at the end of the feed (the first request took from=now).
    await new Promise((resolve) => setTimeout(resolve, 200))
    for (const first_name of ['One', 'Two', 'Three']) {
      await sdk.contacts.create({ first_name })
    }
    await reading
    expect(seen).toEqual(['One', 'Two', 'Three'])
    const stored = follower.cursor
    expect(stored).toEqual(expect.any(String))
    // Resumed later from the stored cursor: what came after its last whole page, nothing before.
    await sdk.contacts.create({ first_name: 'Four' })
    const resumed = sdk.events.follow({ after: stored, wait: 1 })
    const nameOf = (event: Event) => (event.data.object as { first_name?: string }).first_name
    const names = [nameOf((await resumed.next()).value as Event)]
    if (names[0] !== 'Four') {
      names.push(nameOf((await resumed.next()).value as Event))
    }
    expect(names.at(-1)).toBe('Four')
    expect(names).not.toContain('Before')
    await resumed.return?.(undefined)
    stop.abort()
  })

  it('manages webhook endpoints and lists their deliveries', async () => {
    const sdk = client()
    const endpoint = await sdk.webhookEndpoints.create({
      url: 'https://hooks.example.com/in',
      events: ['contact.created'],
    })
    expect(endpoint.secret).toMatch(/^whsec_/)
    expect(await sdk.webhookEndpoints.get(endpoint.id)).toMatchObject({ id: endpoint.id, status: 'enabled' })
    const disabled = await sdk.webhookEndpoints.update(endpoint.id, { status: 'disabled' })
    expect(disabled).toMatchObject({ status: 'disabled', disabled_reason: 'manual' })
    const ids = []
    for await (const one of sdk.webhookEndpoints.all({ limit: 1 })) {
      ids.push(one.id)
    }
    expect(ids).toContain(endpoint.id)
    const rolled = await sdk.webhookEndpoints.rollSecret(endpoint.id, { expire_old_in_seconds: 0 })
    expect(rolled.secret).not.toBe(endpoint.secret)
    await sdk.webhookEndpoints.update(endpoint.id, { status: 'enabled' })
    const delivery = await sdk.webhookEndpoints.test(endpoint.id)
    expect(delivery).toMatchObject({ endpoint_id: endpoint.id, event_type: 'webhook.test' })
    const deliveries = []
    for await (const one of sdk.webhookEndpoints.deliveries.all(endpoint.id)) {
      deliveries.push(one)
    }
    expect(deliveries.map((d) => d.id)).toContain(delivery.id)
    expect(await sdk.webhookEndpoints.deliveries.get(endpoint.id, delivery.id)).toMatchObject({ id: delivery.id })
    // No worker runs here: the delivery has no attempt yet, and nothing has failed to recover.
    const attempts = await sdk.webhookEndpoints.deliveries.attempts.list(endpoint.id, delivery.id, { limit: 5 })
    expect(attempts).toEqual({ attempts: [], next_cursor: null })
    for await (const _ of sdk.webhookEndpoints.deliveries.attempts.all(endpoint.id, delivery.id)) {
      expect.unreachable('no attempt was made')
    }
    const since = new Date(Date.now() - 3_600_000).toISOString()
    const recovery = await sdk.webhookEndpoints.recover(endpoint.id, { since })
    expect(recovery).toMatchObject({ object: 'webhook_recovery', endpoint_id: endpoint.id, since, queued: 0 })
    expect(recovery.lastResponse.statusCode).toBe(202)
    const future = new Date(Date.now() + 3_600_000).toISOString()
    await expect(sdk.webhookEndpoints.recover(endpoint.id, { since: future })).rejects.toMatchObject({
      status: 400,
      code: 'invalid_parameter',
      fieldErrors: [{ field: 'since', message: 'must not be in the future' }],
    })
    await sdk.webhookEndpoints.delete(endpoint.id)
    await expect(sdk.webhookEndpoints.get(endpoint.id)).rejects.toMatchObject({ status: 404 })
  })
})

describe.each(testDialects())('SDK retries a 429 on %s', (dialect) => {
  let t: TestHarness
  let base: string
  let acme: TestAccount
  beforeAll(async () => {
    // One request a second, no burst beyond it: the second in a row is refused with Retry-After.
    t = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '1' } })
    base = await listen(t)
    acme = await t.createAccount('Acme')
  })
  afterAll(() => t.close())

  it('waits as long as Retry-After says, then succeeds, without the caller writing retry code', async () => {
    const recorder = recordingFetch()
    const sdk = createClient({ baseUrl: base, apiKey: acme.key, fetch: recorder.fetch })
    await sdk.me()
    const started = Date.now()
    const created = await sdk.contacts.create({ email: 'limited@example.com' })
    expect(created.email).toBe('limited@example.com')
    expect(recorder.statuses[1]).toBe(429)
    expect(recorder.statuses.at(-1)).toBe(201)
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    const keys = new Set(recorder.requests.slice(1).map((r) => r.headers.get('idempotency-key')))
    expect(keys.size).toBe(1)
  })

  it('a burst of 30 parallel calls against a limit of 5 a second all succeed with the defaults', async () => {
    const burst = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '5', RATE_LIMIT_BURST: '5' } })
    try {
      const owner = await burst.createAccount('Burst')
      const recorder = recordingFetch()
      const retries: RetryInfo[] = []
      const sdk = createClient({
        baseUrl: await listen(burst),
        apiKey: owner.key,
        fetch: recorder.fetch,
        onRetry: (info) => retries.push(info),
      })
      const results = await Promise.allSettled(Array.from({ length: 30 }, () => sdk.me()))
      expect(results.filter((r) => r.status === 'rejected')).toEqual([])
      // Not by luck of timing: the limit refused many attempts, and the retries got through.
      const refused = recorder.statuses.filter((status) => status === 429).length
      expect(refused).toBeGreaterThanOrEqual(20)
      // Every refusal was retried, and reported to the hook, after Retry-After (1 s) and its jitter.
      expect(retries).toHaveLength(refused)
      expect(retries.every((r) => r.status === 429 && r.waitMs >= 1_000)).toBe(true)
    } finally {
      await burst.close()
    }
  }, 15_000)

  it('calls the hooks for each attempt and each retry, with no API key in what they get', async () => {
    const owner = await t.createAccount('Hooked')
    const attempts: AttemptInfo[] = []
    const retries: RetryInfo[] = []
    const sdk = createClient({
      baseUrl: base,
      apiKey: owner.key,
      onRequest: (info) => attempts.push(info),
      onRetry: (info) => retries.push(info),
    })
    await sdk.me()
    // The one token a second is spent: the create is refused once, then goes through.
    const created = await sdk.contacts.create({ email: 'hooked@example.com' })
    const contacts = `${base}/api/v1/contacts`
    expect(attempts).toEqual([
      { method: 'GET', url: `${base}/api/v1/me`, attempt: 1 },
      { method: 'POST', url: contacts, attempt: 1 },
      { method: 'POST', url: contacts, attempt: 2 },
    ])
    expect(retries).toEqual([
      {
        method: 'POST',
        url: contacts,
        attempt: 2,
        waitMs: expect.any(Number),
        status: 429,
        requestId: expect.stringMatching(/^req_/),
        error: undefined,
      },
    ])
    // Retry-After (1 s) plus the first retry's jitter, at most the base delay (500 ms).
    expect(retries[0]?.waitMs).toBeGreaterThanOrEqual(1_000)
    expect(retries[0]?.waitMs).toBeLessThanOrEqual(1_500)
    expect(retries[0]?.requestId).not.toBe(created.lastResponse.requestId)
    const seen = JSON.stringify([attempts, retries])
    expect(seen).not.toContain(owner.key)
    expect(seen).not.toContain(owner.key.slice(-8))
    expect(seen.toLowerCase()).not.toContain('bearer')
  })

  it('with retries off, throws rate_limited with the Retry-After', async () => {
    const sdk = createClient({ baseUrl: base, apiKey: acme.key, maxRetries: 0 })
    const errors = await Promise.all([sdk.me(), sdk.me(), sdk.me(), sdk.me()].map((p) => p.catch((e: unknown) => e)))
    const limited = errors.find((e) => e instanceof ApiError) as ApiError | undefined
    expect(limited).toMatchObject({ status: 429, code: 'rate_limited' })
    expect(limited?.retryAfter).toBeGreaterThanOrEqual(1)
  })
})
