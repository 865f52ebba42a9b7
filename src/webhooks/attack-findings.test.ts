// Defects found by attacking the webhooks feature from the outside, each fixed: these are the
// tests that caught them (they failed on the code before the fix).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { inviteAndAccept, shownKey, signUp } from '../../test/web-client.js'
import type { Resolver } from './webhook-url.js'

const BASE = '/api/v1/webhook_endpoints'
const HOOK_URL = 'https://hooks.example.com/in'

describe.each(testDialects())('attack findings on webhooks, %s', (dialect) => {
  const lookedUp: string[] = []
  const resolve: Resolver = async (hostname) => {
    lookedUp.push(hostname)
    if (hostname === 'hooks.example.com') {
      return [{ address: '93.184.216.34', family: 4 }]
    }
    if (/^localhost\.*$/.test(hostname) || /\.local\.*$/.test(hostname)) {
      return [{ address: '127.0.0.1', family: 4 }]
    }
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
  }
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, resolve })
  })
  afterAll(() => t.close())

  // A member works on contacts and holds read-only keys at most (docs/design.md#web-application);
  // with a full key a member could manage webhooks through the API and receive every contact.
  it('a member cannot create a full-access key, so cannot manage webhooks through the API', async () => {
    const owner = await signUp(t.app, 'attack-owner@example.com', 'Owner Co')
    const member = await signUp(t.app, 'attack-member@example.com', 'Member Co')
    const added = await inviteAndAccept(owner, member.client, 'attack-member@example.com')
    expect(added.statusCode).toBe(303)

    await member.client.get(`/app/${owner.accountId}/settings/api`)
    const created = await member.client.post(`/app/${owner.accountId}/settings/api/keys`, {
      name: 'member key',
      scope: 'full',
      expires: 'never',
    })
    // Refused outright, and no full-access key exists for the account but the owner's own. (The
    // key, when one is issued, is shown on the page the POST redirects to, never in its body: the
    // test cannot rely on finding it there.)
    expect(created.statusCode).toBe(403)
    expect(shownKey(created.body)).toBeUndefined()
    const keys = await t.db.selectFrom('api_keys').select('scopes').where('account_id', '=', owner.accountId).execute()
    expect(keys.filter((k) => String(k.scopes).includes('write'))).toHaveLength(0)
    // A read-only key is still theirs to create.
    const readOnly = await member.client.post(`/app/${owner.accountId}/settings/api/keys`, {
      name: 'member read key',
      scope: 'read',
      expires: 'never',
    })
    expect(readOnly.statusCode).toBe(303)
    const endpoints = await t.db
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('account_id', '=', owner.accountId)
      .execute()
    expect(endpoints).toEqual([])
  })

  // SECURITY-CHECKLIST "Web application accounts": any content type or malformed body on a web
  // route → 4xx page, never 500. The webhook form (and every other web form) answers 500.
  it('a text/plain or XML POST to the add-endpoint form is a 4xx, not a 500', async () => {
    const owner = await signUp(t.app, 'attack-ctype@example.com', 'Ctype Co')
    const page = await owner.client.get(`/app/${owner.accountId}/settings/api/webhooks/new`)
    expect(page.statusCode).toBe(200)
    const cookie = [...owner.client.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
    for (const contentType of ['text/plain', 'application/xml']) {
      const res = await t.app.inject({
        method: 'POST',
        url: `/app/${owner.accountId}/settings/api/webhooks`,
        headers: { cookie, 'content-type': contentType },
        payload: `_csrf=${owner.client.csrf()}&url=${encodeURIComponent(HOOK_URL)}&events=*`,
      })
      expect(res.statusCode, contentType).toBeGreaterThanOrEqual(400)
      expect(res.statusCode, contentType).toBeLessThan(500)
    }
  })

  // docs/webhooks.md "Roll the secret" said "The body may be left out" without saying that the
  // Content-Type goes with it: as on every route, a declared JSON body that is empty is 400.
  it('roll_secret without a body uses the default overlap; a declared JSON body must not be empty', async () => {
    const acme = await t.createAccount()
    const created = await t.inject(acme, { method: 'POST', url: BASE, payload: { url: HOOK_URL } })
    expect(created.statusCode).toBe(201)
    const url = `${BASE}/${created.json().id}/roll_secret`
    const bare = await t.inject(acme, { method: 'POST', url })
    expect(bare.statusCode, bare.body).toBe(200)
    const empty = await t.inject(acme, { method: 'POST', url, headers: { 'content-type': 'application/json' } })
    expect(empty.statusCode).toBe(400)
    expect(empty.json()).toMatchObject({ code: 'invalid_request' })
  })

  // Unknown fields are a 400 everywhere else ("foo is not a known field"); /test and /retry take
  // no body yet accept and silently drop any JSON object.
  it('POST /test with an unknown body field is a 400, like every other body', async () => {
    const acme = await t.createAccount()
    const created = await t.inject(acme, { method: 'POST', url: BASE, payload: { url: HOOK_URL } })
    const res = await t.inject(acme, {
      method: 'POST',
      url: `${BASE}/${created.json().id}/test`,
      payload: { url: 'https://elsewhere.example.com/' },
    })
    expect(res.statusCode, res.body).toBe(400)
  })

  // docs/webhooks.md: events "each at most once". The 400 for a repeated type says "events must NOT
  // have more than 1 items" (the message of the ["*"] branch), which misleads: 3 items are allowed.
  it('a duplicate event type gets a 400 that says it is a duplicate', async () => {
    const acme = await t.createAccount()
    const res = await t.inject(acme, {
      method: 'POST',
      url: BASE,
      payload: { url: HOOK_URL, events: ['contact.created', 'contact.updated', 'contact.created'] },
    })
    expect(res.statusCode).toBe(400)
    expect(res.json().detail).not.toContain('more than 1 items')
  })

  // Port 0 cannot be connected to; the URL rules accept it (and any port: no allowlist, see
  // SECURITY-CHECKLIST API7 "ports outside the allowlist").
  it('a URL with port 0 is refused', async () => {
    const acme = await t.createAccount()
    const res = await t.inject(acme, { method: 'POST', url: BASE, payload: { url: 'https://93.184.216.34:0/' } })
    expect(res.statusCode, res.body).toBe(400)
  })

  // docs/webhooks.md: a host name that is, or ends in, localhost/local/internal/home.arpa "is
  // refused without a lookup". With two trailing dots the name rule is skipped and the name is
  // looked up (the address rules still refuse it when it resolves to a private address).
  it('localhost.. and printer.local.. are refused by the name rule, without a lookup', async () => {
    const acme = await t.createAccount()
    for (const url of ['https://localhost../', 'https://printer.local../']) {
      lookedUp.length = 0
      const res = await t.inject(acme, { method: 'POST', url: BASE, payload: { url } })
      expect(res.statusCode, url).toBe(400)
      expect(lookedUp, url).toEqual([])
      expect(res.json().detail, url).toContain('must not point to localhost or a private network name')
    }
  })
})
