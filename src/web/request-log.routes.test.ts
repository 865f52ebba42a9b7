// Settings → API & Webhooks → Request log (docs/request-log.md#in-the-web-app): requests made with
// the account's keys are listed, filtered and paged; an entry's page shows every field; the
// Request-Id box opens one; members are refused; each mode and each account sees its own log only.
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { inviteAndAccept, shownKey, signUp, type WebClient } from '../../test/web-client.js'
import { REQUEST_LOG_PAGE_SIZE } from './request-log.routes.js'

const MISSING = '/api/v1/contacts/con_01JZZZZZZZZZZZZZZZZZZZZZZZ'

describe.each(testDialects())('Settings → request log on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const home = (accountId: string, test = false) => `/app/${accountId}${test ? '/test' : ''}`
  const logs = (accountId: string, test = false) => `${home(accountId, test)}/settings/api/logs`

  /** Issues a full-access key from the keys page (`test`: the test mode's); the key and its id. */
  async function issue(client: WebClient, accountId: string, name: string, test = false) {
    await client.get(`${home(accountId, test)}/settings/api`)
    const res = await client.post(`${home(accountId, test)}/settings/api/keys`, {
      name,
      scope: 'full',
      expires: 'never',
    })
    expect(res.statusCode, res.body.slice(0, 300)).toBe(303)
    const location = String(res.headers.location)
    const key = shownKey((await client.get(location)).body) as string
    const id = /keys\/(key_\w+)\/created/.exec(location)?.[1] as string
    return { key, id }
  }

  /** An API request with this key; its Request-Id. */
  async function api(
    key: string,
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    options: { payload?: object; headers?: Record<string, string> } = {},
  ): Promise<string> {
    const res = await t.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...options.headers },
      ...(options.payload ? { payload: options.payload } : {}),
    })
    return String(res.headers['request-id'])
  }

  /** The Request-Ids a list page shows, in its order. */
  const listed = (res: LightMyRequestResponse) =>
    [...res.body.matchAll(/data-request-id="(req_\w+)"/g)].map((m) => m[1])

  /** An owner with a key and four requests: /me, a 404, a create with an Idempotency-Key, a DELETE 404. */
  async function ownerWithRequests(email: string) {
    const { client, accountId } = await signUp(t.app, email)
    const key = await issue(client, accountId, 'Server')
    const me = await api(key.key, 'GET', '/api/v1/me')
    const missing = await api(key.key, 'GET', MISSING)
    const created = await api(key.key, 'POST', '/api/v1/contacts', {
      payload: { email: 'ada@example.com' },
      headers: { 'idempotency-key': 'order-17', 'user-agent': 'probe/1.0 <b>' },
    })
    const deleted = await api(key.key, 'DELETE', MISSING)
    return { client, accountId, key, ids: { me, missing, created, deleted } }
  }

  it('lists the requests newest first; an entry’s page shows every field', async () => {
    const { client, accountId, key, ids } = await ownerWithRequests('log-list@example.com')
    const page = await client.get(logs(accountId))
    expect(page.statusCode).toBe(200)
    expect(page.headers['cache-control']).toBe('no-store')
    expect(listed(page)).toEqual([ids.deleted, ids.created, ids.missing, ids.me])
    expect(page.body).toContain(`<code>${MISSING}</code>`)
    expect(page.body).toContain('not_found')
    expect(page.body).toContain('<span class="status retrying">404</span>')
    expect(page.body).toContain('<span class="status succeeded">201</span>')
    expect(page.body).toContain('>Server</td>')
    expect(page.body).toContain(`<option value="${key.id}" >Server (`)
    expect(page.body).toMatch(/href="[^"]*\/settings\/api\/logs" aria-current="page">Request log/)
    expect(page.body).not.toContain('rel="next"')
    // The keys page links to it, for an owner.
    expect((await client.get(`${home(accountId)}/settings/api`)).body).toContain(`href="${logs(accountId)}"`)

    const missing = await client.get(`${logs(accountId)}/${ids.missing}`)
    expect(missing.statusCode).toBe(200)
    for (const text of [ids.missing, MISSING, '/api/v1/contacts/{id}', '>404<', 'not_found', '127.0.0.1', key.id]) {
      expect(missing.body).toContain(text)
    }
    expect(missing.body).toContain('Server (')
    expect(missing.body).toContain(`href="${logs(accountId)}?key_id=${key.id}"`)
    const created = await client.get(`${logs(accountId)}/${ids.created}`)
    expect(created.body).toContain('order-17')
    // The client's User-Agent is escaped, never markup.
    expect(created.body).toContain('probe/1.0 &lt;b&gt;')
    expect(created.body).not.toContain('probe/1.0 <b>')
    expect(created.body).toMatch(/<dt>Replayed<\/dt><dd>no<\/dd>/)
    expect(created.body).toMatch(/<dt>Mode<\/dt><dd>live<\/dd>/)
    // The body sent is never kept.
    expect(created.body).not.toContain('ada@example.com')

    expect((await client.get(`${logs(accountId)}/req_01JZZZZZZZZZZZZZZZZZZZZZZZ`)).statusCode).toBe(404)
    const junk = await client.get(`${logs(accountId)}/nonsense`)
    expect(junk.statusCode).toBe(404)
    expect(junk.body).toContain('Not found')
  })

  it('an empty log says so and how entries appear', async () => {
    const { client, accountId } = await signUp(t.app, 'log-empty@example.com')
    const page = await client.get(logs(accountId))
    expect(page.statusCode).toBe(200)
    expect(page.body).toContain('No requests logged in live mode yet')
    expect(page.body).toContain('appears here within about a second')
  })

  it('filters by status, class, method, path, key and time', async () => {
    const { client, accountId, key, ids } = await ownerWithRequests('log-filter@example.com')
    const other = await issue(client, accountId, 'Other')
    const otherRequest = await api(other.key, 'GET', '/api/v1/me')
    const filtered = async (query: string) => {
      const res = await client.get(`${logs(accountId)}?${query}`)
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200)
      return listed(res)
    }
    expect(await filtered('status=404')).toEqual([ids.deleted, ids.missing])
    expect(await filtered('status=4xx')).toEqual([ids.deleted, ids.missing])
    expect(await filtered('status=2XX')).toEqual([otherRequest, ids.created, ids.me])
    expect(await filtered('method=POST')).toEqual([ids.created])
    expect(await filtered('method=delete')).toEqual([ids.deleted])
    expect(await filtered('path=%2Fapi%2Fv1%2Fcontacts%2F')).toEqual([ids.deleted, ids.missing])
    expect(await filtered('status=404&method=GET')).toEqual([ids.missing])
    expect(await filtered(`key_id=${other.id}`)).toEqual([otherRequest])
    expect(await filtered(`key_id=${key.id}&path=%2Fapi%2Fv1%2Fme`)).toEqual([ids.me])
    // Empty fields, as the form sends them, filter nothing.
    expect(await filtered('status=&key_id=&method=&path=&created_after=&created_before=')).toHaveLength(5)

    // Times as datetime-local sends them (UTC, minutes), and as RFC 3339.
    const minute = (ms: number) => new Date(ms).toISOString().slice(0, 16)
    expect(await filtered(`created_after=${minute(Date.now() - 120_000)}`)).toHaveLength(5)
    expect(await filtered(`created_before=${minute(Date.now() - 120_000)}`)).toEqual([])
    const later = await client.get(`${logs(accountId)}?created_after=${new Date(Date.now() + 60_000).toISOString()}`)
    expect(later.body).toContain('No requests match these filters.')
    // The form shows what it filtered by.
    const shown = await client.get(`${logs(accountId)}?status=4XX&method=get&created_after=2026-01-02T03:04`)
    expect(shown.body).toContain('id="f-status" name="status" type="text" value="4xx"')
    expect(shown.body).toContain('<option value="GET" selected>GET</option>')
    expect(shown.body).toContain('value="2026-01-02T03:04:00"')
  })

  it('answers bad filter values with a message on the page, never a 500', async () => {
    const { client, accountId } = await ownerWithRequests('log-bad@example.com')
    const cases: Array<[string, string]> = [
      ['status=abc', '“abc” is not a status'],
      ['status=600', '“600” is not a status'],
      ['method=FETCH', 'Choose the method from the list'],
      ['key_id=key_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'not a key of this mode'],
      ['path=contacts', 'A path starts with /'],
      [`path=/${'a'.repeat(1100)}`, 'The path is too long'],
      ['created_after=yesterday', 'The “After” time “yesterday” is not a time'],
      ['created_before=2026-02-30T10:00', 'is not a time'],
      ['created_after=2026-01-02T00:00&created_before=2026-01-01T00:00', 'must be earlier than'],
      ['status=404&status=500', 'The link repeats the status'],
      ['before=req_nope', 'This “Older” link is not valid'],
    ]
    for (const [query, message] of cases) {
      const res = await client.get(`${logs(accountId)}?${query}`)
      expect(res.statusCode, query).toBe(400)
      expect(res.body, query).toContain(message)
      expect(listed(res), query).toEqual([])
      expect(res.body, query).toContain('role="alert"')
    }
  })

  it('pages with Older and Newest links', async () => {
    const { client, accountId } = await signUp(t.app, 'log-pages@example.com')
    const { key } = await issue(client, accountId, 'Busy')
    const ids: string[] = []
    for (let i = 0; i < REQUEST_LOG_PAGE_SIZE + 3; i++) {
      ids.push(await api(key, 'GET', '/api/v1/me'))
    }
    const newestFirst = [...ids].reverse()
    const first = await client.get(`${logs(accountId)}?method=GET`)
    expect(listed(first)).toEqual(newestFirst.slice(0, REQUEST_LOG_PAGE_SIZE))
    const older = /href="([^"]+)" rel="next">Older</.exec(first.body)?.[1]?.replaceAll('&amp;', '&') as string
    expect(older).toContain('method=GET')
    expect(older).toContain(`before=${newestFirst[REQUEST_LOG_PAGE_SIZE - 1]}`)
    const second = await client.get(older)
    expect(second.statusCode).toBe(200)
    expect(listed(second)).toEqual(newestFirst.slice(REQUEST_LOG_PAGE_SIZE))
    expect(second.body).not.toContain('rel="next"')
    expect(second.body).toContain(`href="${logs(accountId)}?method=GET">Newest</a>`)
  })

  it('the Request-Id box opens the request; a malformed or unknown one says not found', async () => {
    const { client, accountId, ids } = await ownerWithRequests('log-lookup@example.com')
    const open = async (text: string) => client.get(`${logs(accountId)}?request_id=${encodeURIComponent(text)}`)
    const found = await open(ids.missing)
    expect(found.statusCode).toBe(303)
    expect(found.headers.location).toBe(`${logs(accountId)}/${ids.missing}`)
    // As pasted from a response's headers or an error body.
    expect((await open(` Request-Id: ${ids.created} `)).headers.location).toBe(`${logs(accountId)}/${ids.created}`)
    expect((await open(`"request_id":"${ids.me.toLowerCase()}"`)).headers.location).toBe(`${logs(accountId)}/${ids.me}`)

    const unknown = await open('req_01JZZZZZZZZZZZZZZZZZZZZZZZ')
    expect(unknown.statusCode).toBe(404)
    expect(unknown.body).toContain('Not found: no request <span class="mono">req_01JZZZZZZZZZZZZZZZZZZZZZZZ</span>')
    expect(unknown.body).toContain('value="req_01JZZZZZZZZZZZZZZZZZZZZZZZ"')
    // The log is still shown under the box.
    expect(listed(unknown)).toHaveLength(4)
    const malformed = await open('<script>')
    expect(malformed.statusCode).toBe(404)
    expect(malformed.body).toContain('Not found: <span class="mono">&lt;script&gt;</span> is not a Request-Id.')
    expect(malformed.body).not.toContain('<script>')
    expect((await open('')).body).toContain('Paste a Request-Id first.')
  })

  it('members are refused the list, the entries and the box; admins see them', async () => {
    const owner = await ownerWithRequests('log-roles-owner@example.com')
    const member = (await signUp(t.app, 'log-roles-member@example.com', 'Own')).client
    expect((await inviteAndAccept(owner, member, 'log-roles-member@example.com', 'member')).statusCode).toBe(303)
    const admin = (await signUp(t.app, 'log-roles-admin@example.com', 'Own')).client
    expect((await inviteAndAccept(owner, admin, 'log-roles-admin@example.com', 'admin')).statusCode).toBe(303)
    const urls = [
      logs(owner.accountId),
      `${logs(owner.accountId)}?status=404`,
      `${logs(owner.accountId)}/${owner.ids.missing}`,
      `${logs(owner.accountId)}?request_id=${owner.ids.missing}`,
      logs(owner.accountId, true),
    ]
    for (const url of urls) {
      const refused = await member.get(url)
      expect(refused.statusCode, url).toBe(403)
      expect(refused.body).toContain('Only owners and admins of this account see its request log.')
      expect(refused.body).not.toContain(owner.ids.missing.slice(4))
      expect((await admin.get(url)).statusCode, url).toBeLessThan(400)
    }
    expect(listed(await admin.get(logs(owner.accountId)))).toHaveLength(4)
    const keysPage = await member.get(`${home(owner.accountId)}/settings/api`)
    expect(keysPage.body).not.toContain(`href="${logs(owner.accountId)}"`)
  })

  it('test mode shows only test requests, and the other mode’s id is found only there', async () => {
    const { client, accountId } = await signUp(t.app, 'log-modes@example.com')
    const live = await issue(client, accountId, 'Live')
    const test = await issue(client, accountId, 'Sandbox', true)
    const liveId = await api(live.key, 'GET', '/api/v1/me')
    const testId = await api(test.key, 'GET', '/api/v1/me')

    expect(listed(await client.get(logs(accountId)))).toEqual([liveId])
    const testPage = await client.get(logs(accountId, true))
    expect(testPage.statusCode).toBe(200)
    expect(listed(testPage)).toEqual([testId])
    expect(testPage.body).toContain('class="test-banner"')
    expect(testPage.body).toContain(`href="${logs(accountId)}" role="switch"`)
    expect(testPage.body).toContain('Sandbox (')
    expect(testPage.body).not.toContain('Live (')

    const testEntry = await client.get(`${logs(accountId, true)}/${testId}`)
    expect(testEntry.statusCode).toBe(200)
    expect(testEntry.body).toMatch(/<dt>Mode<\/dt><dd>test<\/dd>/)
    expect((await client.get(`${logs(accountId)}/${testId}`)).statusCode).toBe(404)
    expect((await client.get(`${logs(accountId, true)}/${liveId}`)).statusCode).toBe(404)
    // A live key's id is no filter in test mode.
    expect((await client.get(`${logs(accountId, true)}?key_id=${live.id}`)).statusCode).toBe(400)

    const pasted = await client.get(`${logs(accountId)}?request_id=${testId}`)
    expect(pasted.statusCode).toBe(404)
    expect(pasted.body).toContain('was made with a test key')
    expect(pasted.body).toContain(`href="${logs(accountId, true)}/${testId}"`)
  })

  it('another account’s request is not found', async () => {
    const acme = await ownerWithRequests('log-acme@example.com')
    const bob = await ownerWithRequests('log-bob@example.com')
    const entry = await bob.client.get(`${logs(bob.accountId)}/${acme.ids.missing}`)
    expect(entry.statusCode).toBe(404)
    expect(entry.body).not.toContain(MISSING)
    const pasted = await bob.client.get(`${logs(bob.accountId)}?request_id=${acme.ids.missing}`)
    expect(pasted.statusCode).toBe(404)
    expect(pasted.body).toContain('Not found: no request')
    expect(listed(pasted)).toEqual([bob.ids.deleted, bob.ids.created, bob.ids.missing, bob.ids.me])
    // Bob's account's pages are not Acme's owner's either.
    expect((await acme.client.get(logs(bob.accountId))).statusCode).toBe(404)
  })
})
