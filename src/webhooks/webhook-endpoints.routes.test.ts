import type { InjectOptions } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { expectProblem } from '../../test/helpers.js'
import { staticResolver } from '../../test/static-resolver.js'

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const BASE = '/api/v1/webhook_endpoints'

/** What the tests read of an entry of the OpenAPI document's `webhooks`. */
interface WebhookOperation {
  operationId: string
  parameters: Array<{ name: string; in: string }>
  requestBody: { content: Record<string, { schema: { $ref: string } }> }
}

const resolve = staticResolver({
  'hooks.example.com': ['93.184.216.34'],
  'other.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'loopback.example.com': ['127.0.0.1'],
  'private.example.com': ['10.1.2.3'],
  'metadata.example.com': ['169.254.169.254'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
  'mixed.example.com': ['93.184.216.34', '10.0.0.1'],
})

describe.each(testDialects())('webhook endpoints API on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, resolve })
  })
  afterAll(() => t.close())

  const create = async (account: TestAccount, payload: object = { url: 'https://hooks.example.com/in' }) => {
    const res = await t.inject(account, { method: 'POST', url: BASE, payload })
    expect(res.statusCode, res.body).toBe(201)
    return res.json()
  }

  describe('POST /webhook_endpoints', () => {
    it('creates an endpoint: 201, Location, defaults, the secret shown this once', async () => {
      const acme = await t.createAccount()
      const res = await t.inject(acme, { method: 'POST', url: BASE, payload: { url: 'https://hooks.example.com/in' } })
      expect(res.statusCode).toBe(201)
      const created = res.json()
      expect(created).toEqual({
        object: 'webhook_endpoint',
        id: expect.stringMatching(/^we_[0-9A-Z]{26}$/),
        url: 'https://hooks.example.com/in',
        description: null,
        events: ['*'],
        status: 'enabled',
        disabled_reason: null,
        created_at: expect.stringMatching(TIMESTAMP),
        updated_at: created.created_at,
        livemode: true,
        secret: expect.stringMatching(SECRET),
      })
      expect(res.headers.location).toBe(`http://api.test${BASE}/${created.id}`)

      const { secret, ...endpoint } = created
      const get = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}` })
      expect(get.statusCode).toBe(200)
      expect(get.json()).toEqual(endpoint)
      const list = await t.inject(acme, { method: 'GET', url: BASE })
      expect(list.json()).toEqual({ webhook_endpoints: [endpoint], next_cursor: null })
      for (const res of [get, list]) {
        expect(res.body).not.toContain(secret)
        expect(res.body).not.toContain('secret')
      }
      const deliveries = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries` })
      expect(deliveries.body).not.toContain(secret)
    })

    it('stores the secret encrypted: no column of webhook_endpoints holds it in clear', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const rolled = (
        await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/roll_secret`, payload: {} })
      ).json()
      const dump = JSON.stringify(await t.db.selectFrom('webhook_endpoints').selectAll().execute())
      expect(dump).toContain(created.id)
      for (const secret of [created.secret, rolled.secret]) {
        expect(dump).not.toContain(secret)
        // Nor its key material without the prefix, in base64 or base64url.
        const key = secret.slice('whsec_'.length)
        expect(dump).not.toContain(key)
        expect(dump).not.toContain(Buffer.from(key, 'base64').toString('base64url').slice(0, 40))
        expect(dump).not.toContain(Buffer.from(key, 'base64').toString('hex'))
      }
    })

    it('takes a description and a list of event types', async () => {
      const acme = await t.createAccount()
      const created = await create(acme, {
        url: 'https://other.example.com/hooks?x=1',
        description: 'CRM sync',
        events: ['contact.created', 'contact.updated'],
      })
      expect(created).toMatchObject({ description: 'CRM sync', events: ['contact.created', 'contact.updated'] })
    })

    it('refuses an unknown event type, an unknown field, a missing url: 400, nothing created', async () => {
      const acme = await t.createAccount()
      for (const payload of [
        { url: 'https://hooks.example.com/in', events: ['contact.exploded'] },
        { url: 'https://hooks.example.com/in', events: ['webhook.test'] },
        { url: 'https://hooks.example.com/in', events: [] },
        { url: 'https://hooks.example.com/in', events: ['*', 'contact.created'] },
        { url: 'https://hooks.example.com/in', secret: 'whsec_mine' },
        { url: 'https://hooks.example.com/in', status: 'disabled' },
        { description: 'no url' },
      ]) {
        expectProblem(await t.inject(acme, { method: 'POST', url: BASE, payload }), 400, 'invalid_parameter')
      }
      expect((await t.inject(acme, { method: 'GET', url: BASE })).json().webhook_endpoints).toEqual([])
    })

    it('refuses a URL that is not https or reaches a private address: 400 invalid_parameter naming url', async () => {
      const acme = await t.createAccount()
      for (const url of [
        'http://hooks.example.com/in',
        'ftp://hooks.example.com/in',
        'not a url',
        'https://loopback.example.com/in',
        'https://private.example.com/in',
        'https://metadata.example.com/latest/meta-data',
        'https://mapped.example.com/in',
        'https://mixed.example.com/in',
        'https://unknown.example.com/in',
        'https://127.0.0.1/in',
        'https://2130706433/',
        'https://0x7f.1/',
        'https://[::1]/in',
        'https://[::ffff:127.0.0.1]/in',
        'https://169.254.169.254/',
      ]) {
        const body = expectProblem(
          await t.inject(acme, { method: 'POST', url: BASE, payload: { url } }),
          400,
          'invalid_parameter',
        )
        expect(body.errors?.[0]?.field, url).toBe('url')
      }
      expect((await t.inject(acme, { method: 'GET', url: BASE })).json().webhook_endpoints).toEqual([])
    })

    it('refuses a 21st endpoint: 403 quota_exceeded', async () => {
      const acme = await t.createAccount()
      for (let i = 0; i < 20; i++) {
        await create(acme, { url: `https://hooks.example.com/${i}` })
      }
      expectProblem(
        await t.inject(acme, { method: 'POST', url: BASE, payload: { url: 'https://hooks.example.com/21' } }),
        403,
        'quota_exceeded',
      )
      // Another account has its own 20.
      await create(await t.createAccount())
    })

    it('replays a create with the same Idempotency-Key: the same endpoint and secret, one endpoint', async () => {
      const acme = await t.createAccount()
      const request: InjectOptions = {
        method: 'POST',
        url: BASE,
        headers: { 'idempotency-key': 'create-endpoint-1' },
        payload: { url: 'https://hooks.example.com/in' },
      }
      const first = await t.inject(acme, request)
      expect(first.statusCode).toBe(201)
      const replay = await t.inject(acme, request)
      expect(replay.statusCode).toBe(201)
      expect(replay.headers['idempotent-replayed']).toBe('true')
      expect(replay.json()).toEqual(first.json())
      expect(replay.json().secret).toMatch(SECRET)
      expect(replay.headers.location).toBe(first.headers.location)
      expect((await t.inject(acme, { method: 'GET', url: BASE })).json().webhook_endpoints).toHaveLength(1)
      const reused = await t.inject(acme, { ...request, payload: { url: 'https://other.example.com/in' } })
      expectProblem(reused, 422, 'idempotency_key_reused')
    })

    it('keeps the answers it replays encrypted: no database row holds a secret in clear', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, {
        method: 'POST',
        url: BASE,
        headers: { 'idempotency-key': 'create-sealed' },
        payload: { url: 'https://hooks.example.com/in' },
      })
      const roll: InjectOptions = {
        method: 'POST',
        url: `${BASE}/${created.json().id}/roll_secret`,
        headers: { 'idempotency-key': 'roll-sealed' },
        payload: { expire_old_in_seconds: 0 },
      }
      const rolled = await t.inject(acme, roll)
      const replayed = await t.inject(acme, roll)
      expect(replayed.headers['idempotent-replayed']).toBe('true')
      expect(replayed.json().secret).toBe(rolled.json().secret)
      const dump = JSON.stringify([
        await t.db.selectFrom('idempotency_keys').selectAll().execute(),
        await t.db.selectFrom('webhook_endpoints').selectAll().execute(),
        await t.db.selectFrom('audit_log').selectAll().execute(),
      ])
      expect(dump).toContain('roll-sealed')
      for (const secret of [created.json().secret, rolled.json().secret]) {
        expect(secret).toMatch(SECRET)
        expect(dump).not.toContain(secret.slice('whsec_'.length))
      }
    })
  })

  describe('with WEBHOOK_ALLOW_PRIVATE_URLS', () => {
    let dev: TestHarness
    beforeAll(async () => {
      dev = await createTestHarness({ dialect, resolve, env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } })
    })
    afterAll(() => dev.close())

    it('accepts a loopback http URL', async () => {
      const acme = await dev.createAccount()
      const res = await dev.inject(acme, { method: 'POST', url: BASE, payload: { url: 'http://127.0.0.1:9999/in' } })
      expect(res.statusCode, res.body).toBe(201)
    })
  })

  describe('GET /webhook_endpoints', () => {
    it('pages in creation order with limit=1, each endpoint once, cursors checked', async () => {
      const acme = await t.createAccount()
      const ids: string[] = []
      for (let i = 0; i < 4; i++) {
        ids.push((await create(acme, { url: `https://hooks.example.com/${i}` })).id)
      }
      const seen: string[] = []
      let after: string | null = null
      do {
        const query: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
        const res = await t.inject(acme, { method: 'GET', url: `${BASE}?limit=1${query}` })
        expect(res.statusCode).toBe(200)
        const page = res.json()
        expect(page.webhook_endpoints.length).toBeLessThanOrEqual(1)
        seen.push(...page.webhook_endpoints.map((e: { id: string }) => e.id))
        expect(res.body).not.toContain('whsec_')
        after = page.next_cursor
      } while (after !== null)
      expect(seen).toEqual(ids)

      for (const url of [`${BASE}?after=nope`, `${BASE}?limit=0`, `${BASE}?limit=101`, `${BASE}?status=enabled`]) {
        expect((await t.inject(acme, { method: 'GET', url })).statusCode, url).toBe(400)
      }
      // Another account's cursor is refused.
      const other = await t.createAccount()
      const cursor = (await t.inject(acme, { method: 'GET', url: `${BASE}?limit=1` })).json().next_cursor
      expectProblem(
        await t.inject(other, { method: 'GET', url: `${BASE}?after=${encodeURIComponent(cursor)}` }),
        400,
        'invalid_cursor',
      )
    })
  })

  describe('PATCH and DELETE /webhook_endpoints/{id}', () => {
    it('changes url, events, description and status', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const patch = async (payload: object) => {
        const res = await t.inject(acme, { method: 'PATCH', url: `${BASE}/${created.id}`, payload })
        expect(res.statusCode, res.body).toBe(200)
        expect(res.body).not.toContain('whsec_')
        return res.json()
      }
      expect(
        await patch({ url: 'https://other.example.com/new', events: ['contact.deleted'], description: 'Sync' }),
      ).toMatchObject({
        url: 'https://other.example.com/new',
        events: ['contact.deleted'],
        description: 'Sync',
        status: 'enabled',
        disabled_reason: null,
      })
      expect(await patch({ description: null, events: ['*'] })).toMatchObject({ description: null, events: ['*'] })
      const disabled = await patch({ status: 'disabled' })
      expect(disabled).toMatchObject({ status: 'disabled', disabled_reason: 'manual' })
      expect(disabled.updated_at >= created.updated_at).toBe(true)
      expect(await patch({ status: 'enabled' })).toMatchObject({ status: 'enabled', disabled_reason: null })
      expect((await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}` })).json()).toMatchObject({
        url: 'https://other.example.com/new',
        status: 'enabled',
      })

      for (const payload of [
        { disabled_reason: 'manual' },
        { disabled_reason: null },
        { status: 'paused' },
        { events: ['contact.exploded'] },
        { url: 'http://other.example.com/in' },
        { url: 'https://loopback.example.com/in' },
        { secret: 'whsec_x' },
      ]) {
        const res = await t.inject(acme, { method: 'PATCH', url: `${BASE}/${created.id}`, payload })
        expectProblem(res, 400, 'invalid_parameter')
      }
      expect((await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}` })).json().url).toBe(
        'https://other.example.com/new',
      )
    })

    it('deletes: 204, then 404 everywhere', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const del = await t.inject(acme, { method: 'DELETE', url: `${BASE}/${created.id}` })
      expect(del.statusCode).toBe(204)
      expect(del.body).toBe('')
      expectProblem(await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}` }), 404, 'not_found')
      expectProblem(await t.inject(acme, { method: 'DELETE', url: `${BASE}/${created.id}` }), 404, 'not_found')
      expect((await t.inject(acme, { method: 'GET', url: BASE })).json().webhook_endpoints).toEqual([])
    })
  })

  describe('roll_secret', () => {
    it('returns the endpoint with a new secret; the overlap is 0–604800, default with an empty body', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const url = `${BASE}/${created.id}/roll_secret`
      const rolled = await t.inject(acme, { method: 'POST', url, payload: { expire_old_in_seconds: 0 } })
      expect(rolled.statusCode, rolled.body).toBe(200)
      const { secret, ...endpoint } = rolled.json()
      expect(secret).toMatch(SECRET)
      expect(secret).not.toBe(created.secret)
      expect(endpoint).toMatchObject({ object: 'webhook_endpoint', id: created.id, url: created.url })

      const secrets = new Set([created.secret, secret])
      for (const request of [
        { method: 'POST' as const, url },
        { method: 'POST' as const, url, payload: {} },
        { method: 'POST' as const, url, payload: { expire_old_in_seconds: 604800 } },
      ]) {
        const res = await t.inject(acme, request)
        expect(res.statusCode, res.body).toBe(200)
        secrets.add(res.json().secret)
      }
      expect(secrets.size).toBe(5)

      for (const payload of [
        { expire_old_in_seconds: 604801 },
        { expire_old_in_seconds: -1 },
        { expire_old_in_seconds: 1.5 },
        { expire_old_in_seconds: '60' },
        { other: 1 },
      ]) {
        expectProblem(await t.inject(acme, { method: 'POST', url, payload }), 400, 'invalid_parameter')
      }
      expect((await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}` })).body).not.toContain('whsec_')
    })
  })

  describe('test events and deliveries', () => {
    it('test: 202 with a pending webhook.test delivery, listed, fetched and retried', async () => {
      const acme = await t.createAccount()
      const created = await create(acme, { url: 'https://hooks.example.com/in', events: ['contact.deleted'] })
      const res = await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` })
      expect(res.statusCode, res.body).toBe(202)
      const delivery = res.json()
      expect(delivery).toEqual({
        object: 'webhook_delivery',
        id: expect.stringMatching(/^wd_[0-9A-Z]{26}$/),
        endpoint_id: created.id,
        event_id: expect.stringMatching(/^evt_/),
        event_type: 'webhook.test',
        status: 'pending',
        attempts: 0,
        next_attempt_at: expect.stringMatching(TIMESTAMP),
        last_attempt: null,
        created_at: expect.stringMatching(TIMESTAMP),
        livemode: true,
      })
      const list = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries` })
      expect(list.statusCode).toBe(200)
      expect(list.json()).toEqual({ deliveries: [delivery], next_cursor: null })
      const pending = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries?status=pending` })
      expect(pending.json().deliveries).toEqual([delivery])
      const failed = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries?status=failed` })
      expect(failed.json().deliveries).toEqual([])
      expectProblem(
        await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries?status=lost` }),
        400,
        'invalid_parameter',
      )

      const one = await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries/${delivery.id}` })
      expect(one.statusCode).toBe(200)
      expect(one.json()).toEqual(delivery)

      const retry = await t.inject(acme, {
        method: 'POST',
        url: `${BASE}/${created.id}/deliveries/${delivery.id}/retry`,
      })
      expect(retry.statusCode, retry.body).toBe(202)
      expect(retry.json()).toMatchObject({ object: 'webhook_delivery', id: delivery.id, endpoint_id: created.id })
    })

    it('lists deliveries newest first and pages them', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const ids: string[] = []
      for (let i = 0; i < 3; i++) {
        ids.push((await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` })).json().id)
      }
      const seen: string[] = []
      let after: string | null = null
      do {
        const query: string = after === null ? '' : `&after=${encodeURIComponent(after)}`
        const page = (
          await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries?limit=1${query}` })
        ).json()
        seen.push(...page.deliveries.map((d: { id: string }) => d.id))
        after = page.next_cursor
      } while (after !== null)
      expect(seen).toEqual([...ids].reverse())
    })

    it('test and retry on a disabled endpoint are 409 endpoint_disabled', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const delivery = (await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` })).json()
      await t.inject(acme, { method: 'PATCH', url: `${BASE}/${created.id}`, payload: { status: 'disabled' } })
      expectProblem(
        await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` }),
        409,
        'endpoint_disabled',
      )
      expectProblem(
        await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/deliveries/${delivery.id}/retry` }),
        409,
        'endpoint_disabled',
      )
    })

    it('an unknown delivery, or an unknown endpoint, is 404', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const unknown = 'wd_01M00000000000000000000000'
      for (const request of [
        { method: 'GET' as const, url: `${BASE}/${created.id}/deliveries/${unknown}` },
        { method: 'POST' as const, url: `${BASE}/${created.id}/deliveries/${unknown}/retry` },
        { method: 'GET' as const, url: `${BASE}/we_01M00000000000000000000000/deliveries` },
        { method: 'GET' as const, url: `${BASE}/nope/deliveries/${unknown}` },
      ]) {
        expectProblem(await t.inject(acme, request), 404, 'not_found')
      }
      // A delivery of another endpoint of the same account is not this endpoint's.
      const other = await create(acme, { url: 'https://hooks.example.com/other' })
      const delivery = (await t.inject(acme, { method: 'POST', url: `${BASE}/${other.id}/test` })).json()
      expectProblem(
        await t.inject(acme, { method: 'GET', url: `${BASE}/${created.id}/deliveries/${delivery.id}` }),
        404,
        'not_found',
      )
      expectProblem(
        await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/deliveries/${delivery.id}/retry` }),
        404,
        'not_found',
      )
    })
  })

  describe('tenancy and scopes', () => {
    it("another account's endpoint is 404 for every route, and is left unchanged", async () => {
      const acme = await t.createAccount('Acme')
      const globex = await t.createAccount('Globex')
      const theirs = await create(globex)
      const delivery = (await t.inject(globex, { method: 'POST', url: `${BASE}/${theirs.id}/test` })).json()
      const at = `${BASE}/${theirs.id}`
      for (const request of [
        { method: 'GET' as const, url: at },
        { method: 'PATCH' as const, url: at, payload: { description: 'mine' } },
        { method: 'DELETE' as const, url: at },
        { method: 'POST' as const, url: `${at}/roll_secret`, payload: {} },
        { method: 'POST' as const, url: `${at}/test` },
        { method: 'GET' as const, url: `${at}/deliveries` },
        { method: 'GET' as const, url: `${at}/deliveries/${delivery.id}` },
        { method: 'POST' as const, url: `${at}/deliveries/${delivery.id}/retry` },
      ]) {
        expectProblem(await t.inject(acme, request), 404, 'not_found')
      }
      expect((await t.inject(acme, { method: 'GET', url: BASE })).json().webhook_endpoints).toEqual([])
      const { secret: _s, ...endpoint } = theirs
      expect((await t.inject(globex, { method: 'GET', url: at })).json()).toEqual(endpoint)
      expect((await t.inject(globex, { method: 'GET', url: `${at}/deliveries` })).json().deliveries).toHaveLength(1)
    })

    it('a read-only key (all a member may issue) is 403 insufficient_scope on every webhook route, reads included', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const delivery = (await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` })).json()
      const reader = { ...acme, key: await t.createKey(acme, { scopes: ['read'] }) }
      const at = `${BASE}/${created.id}`
      // An endpoint's URL may carry a token, a delivery what the receiver answered: an admin's business.
      for (const url of [BASE, at, `${at}/deliveries`, `${at}/deliveries/${delivery.id}`]) {
        const res = await t.inject(reader, { method: 'GET', url })
        expectProblem(res, 403, 'insufficient_scope')
        expect(res.body).not.toContain('hooks.example.com')
      }
      for (const request of [
        { method: 'POST' as const, url: BASE, payload: { url: 'https://hooks.example.com/ro' } },
        { method: 'PATCH' as const, url: at, payload: { description: 'ro' } },
        { method: 'DELETE' as const, url: at },
        { method: 'POST' as const, url: `${at}/roll_secret`, payload: {} },
        { method: 'POST' as const, url: `${at}/test` },
        { method: 'POST' as const, url: `${at}/deliveries/${delivery.id}/retry` },
      ]) {
        expectProblem(await t.inject(reader, request), 403, 'insufficient_scope')
      }
      const { secret: _s, ...endpoint } = created
      expect((await t.inject(acme, { method: 'GET', url: at })).json()).toEqual(endpoint)
      expect((await t.inject(acme, { method: 'GET', url: `${at}/deliveries` })).json().deliveries).toHaveLength(1)
    })
  })

  describe('bad input on every route', () => {
    it('an unknown query parameter → 400 naming it, nothing written', async () => {
      const acme = await t.createAccount()
      const created = await create(acme)
      const delivery = (await t.inject(acme, { method: 'POST', url: `${BASE}/${created.id}/test` })).json()
      const at = `${BASE}/${created.id}`
      const before = JSON.stringify(await t.db.selectFrom('webhook_endpoints').selectAll().execute())
      for (const request of [
        { method: 'GET' as const, url: BASE },
        { method: 'POST' as const, url: BASE, payload: { url: 'https://hooks.example.com/q' } },
        { method: 'GET' as const, url: at },
        { method: 'PATCH' as const, url: at, payload: { description: 'q' } },
        { method: 'DELETE' as const, url: at },
        { method: 'POST' as const, url: `${at}/roll_secret`, payload: {} },
        { method: 'POST' as const, url: `${at}/test` },
        { method: 'GET' as const, url: `${at}/deliveries` },
        { method: 'GET' as const, url: `${at}/deliveries/${delivery.id}` },
        { method: 'POST' as const, url: `${at}/deliveries/${delivery.id}/retry` },
      ]) {
        const res = await t.inject(acme, { ...request, url: `${request.url}?dry_run=true` })
        expect(expectProblem(res, 400, 'invalid_parameter').errors, request.url).toEqual([
          { field: 'dry_run', message: 'is not a known field' },
        ])
      }
      expect(JSON.stringify(await t.db.selectFrom('webhook_endpoints').selectAll().execute())).toBe(before)
      const deliveries = (await t.inject(acme, { method: 'GET', url: `${at}/deliveries` })).json().deliveries
      expect(deliveries).toEqual([delivery])
    })
  })

  describe('OpenAPI', () => {
    it('documents a webhooks section: one POST per event type, bodies referencing the Contact component', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
      expect(Object.keys(doc.webhooks).sort()).toEqual(
        ['api_key.exposed', 'contact.created', 'contact.deleted', 'contact.updated', 'webhook.test'].sort(),
      )
      for (const [type, item] of Object.entries(doc.webhooks as Record<string, { post: WebhookOperation }>)) {
        const post = item.post
        expect(post.operationId, type).toEqual(expect.any(String))
        expect(post.parameters.map((p) => `${p.in}:${p.name}`)).toEqual([
          'header:webhook-id',
          'header:webhook-timestamp',
          'header:webhook-signature',
        ])
        const ref = post.requestBody.content['application/json']?.schema.$ref ?? ''
        const name = ref.replace('#/components/schemas/', '')
        const body = doc.components.schemas[name]
        expect(body.required).toEqual(['type', 'timestamp', 'livemode', 'data'])
        expect(body.properties.type.const).toBe(type)
        if (type.startsWith('contact.')) {
          expect(body.properties.data.properties.object).toEqual({ $ref: '#/components/schemas/Contact' })
        }
        if (type === 'api_key.exposed') {
          expect(body.properties.data.properties.object).toEqual({ $ref: '#/components/schemas/ApiKey' })
          expect(body.properties.data.required).toEqual(['object', 'source_url'])
        }
      }
      expect(doc.components.schemas.Contact.properties.email).toBeDefined()
      expect(JSON.stringify(doc.paths)).not.toContain('whsec_x')
    })
  })
})
