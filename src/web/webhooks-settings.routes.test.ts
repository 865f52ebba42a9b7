import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { staticResolver } from '../../test/static-resolver.js'
import { signUp, type WebClient } from '../../test/web-client.js'
import { manualClock } from '../lib/clock.js'
import { addMembership } from '../users/users.store.js'

const ANY_SECRET = /whsec_[A-Za-z0-9+/=]{40,}/
const FORM_TYPE = 'application/x-www-form-urlencoded'
const HOOK_URL = 'https://hooks.example.com/contacts'

describe.each(testDialects())('Settings → webhooks on %s', (dialect) => {
  const clock = manualClock(new Date())
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({
      dialect,
      clock,
      resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'], 'internal.example.com': ['127.0.0.1'] }),
    })
  })
  afterAll(() => t.close())

  const settings = (accountId: string) => `/app/${accountId}/settings/api`
  const hooks = (accountId: string) => `/app/${accountId}/settings/api/webhooks`

  /** Posts a urlencoded body with repeated fields (the event checkboxes), as a browser does. */
  async function postForm(client: WebClient, url: string, fields: [string, string][], csrf = client.csrf()) {
    return t.app.inject({
      method: 'POST',
      url,
      headers: { cookie: cookieOf(client), 'content-type': FORM_TYPE },
      payload: new URLSearchParams([['_csrf', csrf], ...fields]).toString(),
    })
  }
  const cookieOf = (client: WebClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ')

  /** Adds an endpoint through the form; returns the redirect's target and the endpoint id. */
  async function addEndpoint(client: WebClient, accountId: string, url = HOOK_URL) {
    await client.get(`${hooks(accountId)}/new`)
    const res = await postForm(client, hooks(accountId), [
      ['url', url],
      ['events', '*'],
      ['description', 'CRM sync'],
    ])
    expect(res.statusCode, res.body.slice(0, 500)).toBe(303)
    const location = String(res.headers.location)
    const endpointId = /\/webhooks\/(we_[0-9A-Z]{26})\/secret$/.exec(location)?.[1] as string
    expect(endpointId).toBeDefined()
    // The client keeps the sealed secret cookie the redirect's page opens.
    for (const c of res.cookies) {
      client.cookies.set(c.name, c.value)
    }
    return { res, location, endpointId }
  }

  const endpointRow = (accountId: string, id: string) =>
    t.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst()
  const auditActions = async (accountId: string) =>
    (
      await t.db
        .selectFrom('audit_log')
        .select(['action', 'target_id', 'actor_user_id'])
        .where('account_id', '=', accountId)
        .orderBy('id')
        .execute()
    ).map((r) => r.action)

  it('adds an endpoint: the secret is shown once after the redirect, never on reload, and only one is created', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-add@example.com')
    const { location, endpointId } = await addEndpoint(client, accountId)
    const shown = await client.get(location)
    expect(shown.statusCode).toBe(200)
    expect(shown.headers['cache-control']).toBe('no-store')
    expect(shown.body).toContain('shown only this once')
    const secret = ANY_SECRET.exec(shown.body)?.[0]
    expect(secret).toBeDefined()
    const reveal = await client.post(`${hooks(accountId)}/${endpointId}/reveal`, {})
    expect(reveal.body).toContain(`value="${secret}"`)

    const reloaded = await client.get(location)
    expect(reloaded.statusCode).toBe(200)
    expect(reloaded.body).not.toMatch(ANY_SECRET)
    expect(reloaded.body).toContain('Secret already shown')
    const endpoints = await t.db
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('account_id', '=', accountId)
      .execute()
    expect(endpoints).toHaveLength(1)

    const page = await client.get(hooks(accountId))
    expect(page.body).toContain(HOOK_URL)
    expect(page.body).toContain('CRM sync')
    expect(page.body).toContain('All events')
    expect(page.body).toContain('<span class="status enabled">enabled</span>')
    expect(page.body).not.toMatch(ANY_SECRET)
    expect(page.body).toContain('Webhook endpoint added')
  })

  it('the sealed secret cookie opens only for its session', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-seal@example.com')
    const { location } = await addEndpoint(client, accountId)
    const sealed = client.cookies.get('secret_once') as string
    const other = await signUp(t.app, 'hooks-seal-other@example.com')
    // Another person (an admin of the account) with the cookie copied over sees no secret.
    await addMembership(
      t.db,
      accountId,
      (
        await t.db
          .selectFrom('users')
          .select('id')
          .where('email_lower', '=', 'hooks-seal-other@example.com')
          .executeTakeFirstOrThrow()
      ).id,
      'admin',
      clock.now(),
    )
    other.client.cookies.set('secret_once', sealed)
    const res = await other.client.get(location)
    expect(res.statusCode).toBe(200)
    expect(res.body).not.toMatch(ANY_SECRET)
  })

  it('subscribes to chosen event types', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-types@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    await client.get(`${hooks(accountId)}/new`)
    const res = await postForm(client, hooks(accountId), [
      ['url', 'https://hooks.example.com/two'],
      ['events', 'contact.created'],
      ['events', 'contact.deleted'],
    ])
    expect(res.statusCode).toBe(303)
    const rows = await t.db
      .selectFrom('webhook_endpoints')
      .select(['id', 'events', 'description'])
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute()
    expect(rows.map((r) => [r.id === endpointId, JSON.parse(r.events), r.description])).toEqual([
      [true, ['*'], 'CRM sync'],
      [false, ['contact.created', 'contact.deleted'], null],
    ])
    const page = await client.get(hooks(accountId))
    expect(page.body).toContain('contact.created, contact.deleted')
  })

  it('a bad URL re-renders the form with the reason and the input kept; nothing is created', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-bad@example.com')
    await client.get(`${hooks(accountId)}/new`)
    const cases: [string, RegExp][] = [
      ['http://hooks.example.com/plain', /https/],
      ['https://internal.example.com/hook', /must resolve only to public addresses/],
      ['https://nowhere.example.com/hook', /resolve/],
      ['', /Enter the endpoint/],
    ]
    for (const [url, reason] of cases) {
      const res = await postForm(client, hooks(accountId), [
        ['url', url],
        ['events', 'contact.created'],
        ['description', 'Kept <desc>'],
      ])
      expect(res.statusCode, url).toBe(400)
      expect(res.headers['content-type']).toContain('text/html')
      expect(res.body, url).toMatch(reason)
      expect(res.body).toContain(`value="${url}"`)
      expect(res.body).toContain('value="Kept &lt;desc&gt;"')
      expect(res.body).toMatch(/value="contact\.created" checked/)
      expect(res.body).toContain('aria-invalid="true"')
    }
    const none = await postForm(client, hooks(accountId), [['url', HOOK_URL]])
    expect(none.statusCode).toBe(400)
    expect(none.body).toContain('Choose all events, or at least one event type')
    const odd = await postForm(client, hooks(accountId), [
      ['url', HOOK_URL],
      ['events', 'contact.exploded'],
    ])
    expect(odd.statusCode).toBe(400)
    expect(
      await t.db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', accountId).execute(),
    ).toEqual([])
  })

  it('reveal is a POST that shows the secret and is audited with the person and address', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-reveal@example.com')
    const { location, endpointId } = await addEndpoint(client, accountId)
    const secret = ANY_SECRET.exec((await client.get(location)).body)?.[0]
    const page = await client.get(`${hooks(accountId)}/${endpointId}`)
    expect(page.body).not.toMatch(ANY_SECRET)
    const revealed = await client.post(`${hooks(accountId)}/${endpointId}/reveal`, {})
    expect(revealed.statusCode).toBe(200)
    expect(revealed.headers['cache-control']).toBe('no-store')
    expect(revealed.body).toContain(`value="${secret}"`)
    const user = await t.db
      .selectFrom('users')
      .select('id')
      .where('email_lower', '=', 'hooks-reveal@example.com')
      .executeTakeFirstOrThrow()
    const log = await t.db
      .selectFrom('audit_log')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('action', '=', 'webhook_endpoint.secret_revealed')
      .execute()
    expect(log.map((r) => [r.target_id, r.actor_user_id, r.ip])).toEqual([[endpointId, user.id, '127.0.0.1']])
    // Revealing is not possible by a GET.
    expect((await client.get(`${hooks(accountId)}/${endpointId}/reveal`)).statusCode).toBe(404)
  })

  it('rolls the secret: with an overlap at once (shown once after redirect); "now" asks first', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-roll@example.com')
    const { location, endpointId } = await addEndpoint(client, accountId)
    const first = ANY_SECRET.exec((await client.get(location)).body)?.[0]
    await client.get(`${hooks(accountId)}/${endpointId}`)
    const rolled = await client.post(`${hooks(accountId)}/${endpointId}/roll`, { overlap: '1h' })
    expect(rolled.statusCode).toBe(303)
    expect(rolled.headers.location).toBe(location)
    for (const c of rolled.cookies) {
      client.cookies.set(c.name, c.value)
    }
    const shown = await client.get(location)
    const second = ANY_SECRET.exec(shown.body)?.[0]
    expect(second).toBeDefined()
    expect(second).not.toBe(first)
    expect(shown.body).toContain('The previous secret also signs deliveries until')
    expect((await endpointRow(accountId, endpointId))?.previous_secret_expires_at).toBe(
      new Date(clock.now().getTime() + 3600_000).toISOString(),
    )
    expect((await client.get(location)).body).not.toMatch(ANY_SECRET)

    await client.get(`${hooks(accountId)}/${endpointId}`)
    const before = (await endpointRow(accountId, endpointId))?.secret
    const ask = await client.post(`${hooks(accountId)}/${endpointId}/roll`, { overlap: 'now' })
    expect(ask.statusCode).toBe(200)
    expect(ask.body).toContain('Roll the secret now?')
    expect((await endpointRow(accountId, endpointId))?.secret).toBe(before)
    const confirmed = await client.post(`${hooks(accountId)}/${endpointId}/roll`, { overlap: 'now', confirm: 'yes' })
    expect(confirmed.statusCode).toBe(303)
    const row = await endpointRow(accountId, endpointId)
    expect(row?.secret).not.toBe(before)
    expect(row?.previous_secret).toBeNull()
    const odd = await client.post(`${hooks(accountId)}/${endpointId}/roll`, { overlap: 'toString' })
    expect(odd.statusCode).toBe(400)
    expect(await auditActions(accountId)).toEqual([
      'webhook_endpoint.created',
      'webhook_endpoint.secret_rolled',
      'webhook_endpoint.secret_rolled',
    ])
  })

  it('disables and enables; a test event while disabled is refused on the page, not a 500', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-status@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    const url = `${hooks(accountId)}/${endpointId}`
    await client.get(url)
    const disabled = await client.post(`${url}/status`, { status: 'disabled' })
    expect(disabled.statusCode).toBe(303)
    expect(await endpointRow(accountId, endpointId)).toMatchObject({ status: 'disabled', disabled_reason: 'manual' })
    const page = await client.get(String(disabled.headers.location))
    expect(page.body).toContain('The endpoint is disabled')
    expect(page.body).toContain('disabled by hand')
    expect(page.body).toContain('Enable endpoint')

    const test = await client.post(`${url}/test`, {})
    expect(test.statusCode).toBe(409)
    expect(test.headers['content-type']).toContain('text/html')
    expect(test.body).toContain('The endpoint is disabled')
    expect(
      await t.db.selectFrom('webhook_deliveries').select('id').where('account_id', '=', accountId).execute(),
    ).toEqual([])

    const enabled = await client.post(`${url}/status`, { status: 'enabled' })
    expect(enabled.statusCode).toBe(303)
    expect(await endpointRow(accountId, endpointId)).toMatchObject({ status: 'enabled', disabled_reason: null })
    expect(await auditActions(accountId)).toEqual([
      'webhook_endpoint.created',
      'webhook_endpoint.updated',
      'webhook_endpoint.updated',
    ])
  })

  it('a test event creates a pending delivery shown on the endpoint page', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-test@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    const url = `${hooks(accountId)}/${endpointId}`
    await client.get(url)
    const sent = await client.post(`${url}/test`, {})
    expect(sent.statusCode).toBe(303)
    const deliveries = await t.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('account_id', '=', accountId)
      .execute()
    expect(deliveries.map((d) => [d.endpoint_id, d.event_type, d.status])).toEqual([
      [endpointId, 'webhook.test', 'pending'],
    ])
    const page = await client.get(String(sent.headers.location))
    expect(page.body).toContain('A webhook.test event is queued')
    expect(page.body).toContain(`data-delivery-id="${deliveries[0]?.id}"`)
    expect(page.body).toContain('<span class="status pending">pending</span>')
    expect(await auditActions(accountId)).toContain('webhook_endpoint.test_sent')
  })

  it('a delivery page shows the headers, the body sent, the escaped response, and resends', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-delivery@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    // A contact change through the API makes the event whose body a delivery sends.
    const key = await t.createKey({ id: accountId, name: 'Acme', key: '', keyId: '' })
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}` },
      payload: { email: 'ada@example.com', first_name: 'Ada' },
    })
    expect(created.statusCode).toBe(201)
    const event = await t.db
      .selectFrom('events')
      .selectAll()
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow()
    const attemptAt = new Date('2026-11-20T10:00:00.000Z')
    const deliveryId = 'wd_01JD0000000000000000000000'
    await t.db
      .insertInto('webhook_deliveries')
      .values({
        account_id: accountId,
        id: deliveryId,
        endpoint_id: endpointId,
        event_id: event.id,
        event_type: event.type,
        event_created_at: event.created_at,
        status: 'failed',
        attempts: 3,
        next_attempt_at: null,
        lease_expires_at: null,
        last_attempt_at: attemptAt.toISOString(),
        last_status_code: 500,
        last_duration_ms: 42,
        last_error: null,
        last_response_excerpt: '<script>alert("pwned")</script><img src=x onerror=alert(1)>',
        payload: null,
        created_at: event.created_at,
      })
      .execute()
    const attempt = (n: number, excerpt: string, status: number | null, error: string | null = null) => ({
      account_id: accountId,
      delivery_id: deliveryId,
      attempt: n,
      at: new Date(attemptAt.getTime() - (3 - n) * 60_000).toISOString(),
      status_code: status,
      duration_ms: 40 + n,
      error,
      response_excerpt: excerpt,
    })
    await t.db
      .insertInto('webhook_attempts')
      .values([
        attempt(1, '', null, 'connection refused'),
        attempt(2, 'upstream unavailable', 503),
        attempt(3, '<script>alert("pwned")</script><img src=x onerror=alert(1)>', 500),
      ])
      .execute()

    const url = `${hooks(accountId)}/${endpointId}/deliveries/${deliveryId}`
    const page = await client.get(url)
    expect(page.statusCode).toBe(200)
    expect(page.body).not.toContain('<script>alert')
    expect(page.body).not.toContain('<img src=x')
    expect(page.body).toContain(
      '&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;',
    )
    expect(page.body).toContain(event.id) // webhook-id
    expect(page.body).toContain(String(attemptAt.getTime() / 1000)) // webhook-timestamp
    expect(page.body).toContain('v1,… <span class="hint">(not stored)</span>')
    expect(page.body).toContain('&quot;type&quot;:&quot;contact.created&quot;')
    expect(page.body).toContain('&quot;email&quot;:&quot;ada@example.com&quot;')
    expect(page.body).toContain('HTTP 500')
    // Every attempt, oldest first, each answer escaped.
    expect([...page.body.matchAll(/data-attempt="(\d+)"/g)].map((m) => m[1])).toEqual(['1', '2', '3'])
    expect(page.body).toContain('connection refused')
    expect(page.body).toContain('upstream unavailable')
    expect(page.body).toContain('41 ms')
    expect(page.body).not.toContain('The latest')
    const list = await client.get(`${hooks(accountId)}/${endpointId}`)
    expect(list.body).toContain(`data-delivery-id="${deliveryId}"`)
    expect(list.body).toContain('42 ms')

    const resent = await client.post(`${url}/retry`, {})
    expect(resent.statusCode).toBe(303)
    const row = await t.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', deliveryId)
      .executeTakeFirstOrThrow()
    expect(row.status).toBe('retrying')
    expect(row.next_attempt_at).toBe(clock.now().toISOString())
    expect((await client.get(String(resent.headers.location))).body).toContain(
      'One more attempt of this delivery is queued',
    )
    expect(await auditActions(accountId)).toContain('webhook_delivery.retried')
    expect(
      (await client.get(`${hooks(accountId)}/${endpointId}/deliveries/wd_01JD0000000000000000000001`)).statusCode,
    ).toBe(404)
  })

  it('"Resend all failed since…" resends the failed deliveries created since then, and says when none', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-recover@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    const now = clock.now().getTime()
    const failed = (id: string, hoursAgo: number) => ({
      account_id: accountId,
      id,
      endpoint_id: endpointId,
      event_id: 'evt_01JD0000000000000000000000',
      event_type: 'contact.created',
      event_created_at: new Date(now - hoursAgo * 3_600_000).toISOString(),
      status: 'failed' as const,
      attempts: 10,
      next_attempt_at: null,
      lease_expires_at: null,
      last_attempt_at: null,
      last_status_code: null,
      last_duration_ms: null,
      last_error: null,
      last_response_excerpt: null,
      payload: null,
      created_at: new Date(now - hoursAgo * 3_600_000).toISOString(),
    })
    const old = 'wd_01JD0000000000000000000010'
    const recent = 'wd_01JD0000000000000000000011'
    await t.db
      .insertInto('webhook_deliveries')
      .values([failed(old, 48), failed(recent, 2)])
      .execute()
    const statuses = async () =>
      Object.fromEntries(
        (
          await t.db
            .selectFrom('webhook_deliveries')
            .select(['id', 'status'])
            .where('account_id', '=', accountId)
            .where('endpoint_id', '=', endpointId)
            .execute()
        ).map((row) => [row.id, row.status]),
      )
    const page = `${hooks(accountId)}/${endpointId}`
    const form = await client.get(page)
    // The form offers the last day, in UTC, to the second.
    const offered = new Date(Math.floor((now - 86_400_000) / 1000) * 1000).toISOString().replace(/(\.000)?Z$/, '')
    expect(form.body).toContain(`name="since" type="datetime-local" step="1" required value="${offered}"`)

    for (const [since, message] of [
      ['yesterday', 'Enter the time to resend from'],
      [new Date(now + 3_600_000).toISOString(), 'since must not be in the future'],
    ] as const) {
      const refused = await postForm(client, `${page}/recover`, [['since', since]])
      expect(refused.statusCode, since).toBe(400)
      expect(refused.body).toContain(message)
      expect(refused.body).toContain(`value="${since}"`)
    }
    expect(await statuses()).toEqual({ [old]: 'failed', [recent]: 'failed' })

    const since = new Date(now - 24 * 3_600_000).toISOString().slice(0, 19)
    const done = await postForm(client, `${page}/recover`, [['since', since]])
    expect(done.statusCode, done.body.slice(0, 300)).toBe(303)
    expect((await client.get(String(done.headers.location))).body).toContain(
      '1 failed delivery of that period is queued for one more attempt.',
    )
    expect(await statuses()).toEqual({ [old]: 'failed', [recent]: 'retrying' })
    expect(await auditActions(accountId)).toContain('webhook_endpoint.recovered')

    const again = await postForm(client, `${page}/recover`, [['since', since]])
    expect((await client.get(String(again.headers.location))).body).toContain('nothing was resent')
  })

  it('past 20 endpoints the form says so (403), and a resend to a disabled endpoint is refused on its page', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-quota@example.com')
    let last = ''
    for (let i = 0; i < 20; i++) {
      last = (await addEndpoint(client, accountId, `https://hooks.example.com/${i}`)).endpointId
    }
    await client.get(`${hooks(accountId)}/new`)
    const refused = await postForm(client, hooks(accountId), [
      ['url', 'https://hooks.example.com/21'],
      ['events', '*'],
    ])
    expect(refused.statusCode).toBe(403)
    expect(refused.body).toContain('at most 20 webhook endpoints')
    expect(refused.body).toContain('value="https://hooks.example.com/21"')

    const url = `${hooks(accountId)}/${last}`
    await client.get(url)
    expect((await client.post(`${url}/test`, {})).statusCode).toBe(303)
    const delivery = await t.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow()
    expect((await client.post(`${url}/status`, { status: 'disabled' })).statusCode).toBe(303)
    await client.get(`${url}/deliveries/${delivery.id}`)
    const resend = await client.post(`${url}/deliveries/${delivery.id}/retry`, {})
    expect(resend.statusCode).toBe(409)
    expect(resend.body).toContain('The endpoint is disabled')
    expect(resend.body).toContain(`Delivery <span class="mono">${delivery.id}</span>`)
  })

  it('deletes after confirmation', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-delete@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    const confirm = await client.get(`${hooks(accountId)}/${endpointId}/delete`)
    expect(confirm.statusCode).toBe(200)
    expect(confirm.body).toContain('Delete this endpoint?')
    expect(await endpointRow(accountId, endpointId)).toBeDefined()
    const deleted = await client.post(`${hooks(accountId)}/${endpointId}/delete`, {})
    expect(deleted.statusCode).toBe(303)
    expect(deleted.headers.location).toBe(`${hooks(accountId)}?notice=endpoint-deleted`)
    expect(await endpointRow(accountId, endpointId)).toBeUndefined()
    const page = await client.get(String(deleted.headers.location))
    expect(page.body).toContain('The webhook endpoint was deleted.')
    expect(page.body).toContain('No webhook endpoints yet.')
    expect(await auditActions(accountId)).toEqual(['webhook_endpoint.created', 'webhook_endpoint.deleted'])
    expect((await client.get(`${hooks(accountId)}/${endpointId}`)).statusCode).toBe(404)
  })

  it('a member may not see or manage webhooks; an admin may', async () => {
    const owner = await signUp(t.app, 'hooks-owner@example.com', 'Hooks Co')
    const { endpointId } = await addEndpoint(owner.client, owner.accountId)
    const member = await signUp(t.app, 'hooks-member@example.com', 'Member Co')
    const memberUser = await t.db
      .selectFrom('users')
      .select('id')
      .where('email_lower', '=', 'hooks-member@example.com')
      .executeTakeFirstOrThrow()
    await addMembership(t.db, owner.accountId, memberUser.id, 'member', clock.now())

    const page = await member.client.get(settings(owner.accountId))
    expect(page.statusCode).toBe(200)
    expect(page.body).not.toContain(HOOK_URL)
    expect(page.body).toContain('owners and admins of this account manage the endpoints')
    expect(page.body).not.toContain(`href="${hooks(owner.accountId)}"`)
    const base = `${hooks(owner.accountId)}/${endpointId}`
    for (const url of [
      hooks(owner.accountId),
      `${hooks(owner.accountId)}/new`,
      base,
      `${base}/delete`,
      `${base}/secret`,
    ]) {
      const res = await member.client.get(url)
      expect(res.statusCode, url).toBe(403)
      expect(res.body).not.toContain(HOOK_URL)
    }
    for (const url of [`${base}/reveal`, `${base}/roll`, `${base}/status`, `${base}/test`, `${base}/delete`]) {
      const res = await member.client.post(url, { overlap: 'now', confirm: 'yes', status: 'disabled' })
      expect(res.statusCode, url).toBe(403)
      expect(res.body).not.toMatch(ANY_SECRET)
    }
    const create = await postForm(member.client, hooks(owner.accountId), [
      ['url', HOOK_URL],
      ['events', '*'],
    ])
    expect(create.statusCode).toBe(403)
    const rows = await t.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', owner.accountId)
      .execute()
    expect(rows.map((r) => [r.id, r.status])).toEqual([[endpointId, 'enabled']])
    expect(await auditActions(owner.accountId)).toEqual(['webhook_endpoint.created'])

    const admin = await signUp(t.app, 'hooks-admin@example.com', 'Admin Co')
    const adminUser = await t.db
      .selectFrom('users')
      .select('id')
      .where('email_lower', '=', 'hooks-admin@example.com')
      .executeTakeFirstOrThrow()
    await addMembership(t.db, owner.accountId, adminUser.id, 'admin', clock.now())
    expect((await admin.client.get(hooks(owner.accountId))).body).toContain(HOOK_URL)
    await addEndpoint(admin.client, owner.accountId, 'https://hooks.example.com/admin')
  })

  it("another account's endpoint is a 404 everywhere and nothing changes", async () => {
    const alice = await signUp(t.app, 'hooks-alice@example.com', 'Alice Co')
    const { endpointId } = await addEndpoint(alice.client, alice.accountId)
    const bob = await signUp(t.app, 'hooks-bob@example.com', 'Bob Co')
    await bob.client.get(settings(bob.accountId))
    for (const prefix of [hooks(bob.accountId), hooks(alice.accountId)]) {
      const base = `${prefix}/${endpointId}`
      for (const url of [
        base,
        `${base}/delete`,
        `${base}/secret`,
        `${base}/deliveries/wd_01JD0000000000000000000000`,
      ]) {
        const res = await bob.client.get(url)
        expect(res.statusCode, url).toBe(404)
        expect(res.body).not.toContain(HOOK_URL)
      }
      for (const url of [`${base}/reveal`, `${base}/roll`, `${base}/status`, `${base}/test`, `${base}/delete`]) {
        const res = await bob.client.post(url, { overlap: '1h', status: 'disabled' })
        expect(res.statusCode, url).toBe(404)
        expect(res.body).not.toMatch(ANY_SECRET)
      }
    }
    expect(await endpointRow(alice.accountId, endpointId)).toMatchObject({ status: 'enabled', previous_secret: null })
    expect(await auditActions(alice.accountId)).toEqual(['webhook_endpoint.created'])
  })

  it('refuses every form without the CSRF token (or with a forged one) and changes nothing', async () => {
    const { client, accountId } = await signUp(t.app, 'hooks-csrf@example.com')
    const { endpointId } = await addEndpoint(client, accountId)
    const base = `${hooks(accountId)}/${endpointId}`
    await client.get(base)
    for (const url of [
      hooks(accountId),
      `${base}/reveal`,
      `${base}/roll`,
      `${base}/status`,
      `${base}/test`,
      `${base}/delete`,
    ]) {
      for (const token of ['', 'forged']) {
        const res = await postForm(
          client,
          url,
          [
            ['url', 'https://hooks.example.com/csrf'],
            ['overlap', '1h'],
            ['status', 'disabled'],
          ],
          token,
        )
        expect(res.statusCode, url).toBe(403)
        expect(res.body).toContain('Form expired')
        expect(res.body).not.toMatch(ANY_SECRET)
      }
    }
    expect(await endpointRow(accountId, endpointId)).toMatchObject({ status: 'enabled', previous_secret: null })
    expect(
      await t.db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', accountId).execute(),
    ).toHaveLength(1)
    expect(await auditActions(accountId)).toEqual(['webhook_endpoint.created'])
  })
})
