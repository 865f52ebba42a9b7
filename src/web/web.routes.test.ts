import type { LightMyRequestResponse } from 'fastify'
import type { KyselyPlugin } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { shownKey, signUp, type WebClient, webClient } from '../../test/web-client.js'
import { buildApp } from '../app.js'
import { manualClock } from '../lib/clock.js'

const ANY_FULL_KEY = /service_live_[A-Za-z0-9]{32}/
const FORM_TYPE = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'

describe.each(testDialects())('web app on %s', (dialect) => {
  const clock = manualClock(new Date())
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock })
  })
  afterAll(() => t.close())

  const me = (key: string) =>
    t.app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${key}` } })
  const keyCount = async (accountId: string) =>
    (await t.db.selectFrom('api_keys').select('id').where('account_id', '=', accountId).execute()).length

  async function createKey(
    client: ReturnType<typeof webClient>,
    accountId: string,
    fields: Record<string, string> = {},
  ) {
    await client.get(`/app/${accountId}/settings/api`)
    const res = await client.post(`/app/${accountId}/settings/api/keys`, {
      name: 'Production',
      scope: 'full',
      expires: 'never',
      ...fields,
    })
    const { page, key } = await shownOnce(client, res)
    return { res: page, key }
  }

  /**
   * A new key's POST redirects (303) to the page that shows it once (docs/design.md#web-application);
   * a reload of that page shows it no more and issues nothing.
   */
  async function shownOnce(client: WebClient, res: LightMyRequestResponse) {
    expect(res.statusCode, res.body.slice(0, 500)).toBe(303)
    expect(shownKey(res.body)).toBeUndefined()
    const location = String(res.headers.location)
    expect(location).toMatch(/\/settings\/api\/keys\/key_\w+\/created/)
    const page = await client.get(location)
    expect(page.statusCode).toBe(200)
    const key = shownKey(page.body)
    expect(key).toBeDefined()
    const reload = await client.get(location)
    expect(reload.statusCode).toBe(303)
    expect(reload.headers.location).toContain('notice=key-shown')
    expect(shownKey(reload.body)).toBeUndefined()
    return { page, key: key as string }
  }

  describe('sign-up, sign-in, sign-out', () => {
    it('sign-up creates the account and its owner and signs in with a HttpOnly, SameSite=Lax session', async () => {
      const client = webClient(t.app)
      await client.get('/sign-up')
      const res = await client.post('/sign-up', {
        email: 'owner@example.com',
        password: 'correct-horse-battery',
        account_name: 'Acme',
      })
      expect(res.statusCode).toBe(303)
      // Where a sign-in lands too: the account's contacts.
      expect(res.headers.location).toMatch(/^\/app\/acct_[0-9A-Z]{26}\/contacts$/)
      const sid = res.cookies.find((c) => c.name === 'sid')
      expect(sid).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' })
      expect(sid?.secure).toBeFalsy()
      const page = await client.get(String(res.headers.location))
      expect(page.statusCode).toBe(200)
      expect(page.body).toContain('<h1>Contacts</h1>')
      const user = await t.db
        .selectFrom('users')
        .selectAll()
        .where('email_lower', '=', 'owner@example.com')
        .executeTakeFirstOrThrow()
      expect(user.password_hash).toMatch(/^\$argon2id\$/)
    })

    it('tells what to fix on a bad sign-up and creates nothing', async () => {
      const client = webClient(t.app)
      await client.get('/sign-up')
      const before = (await t.db.selectFrom('users').select('id').execute()).length
      const res = await client.post('/sign-up', { email: 'not-an-email', password: 'short', account_name: '' })
      expect(res.statusCode).toBe(400)
      expect(res.body).toContain('Enter a valid email address')
      expect(res.body).toContain('Use at least 10 characters')
      expect(res.body).toContain('Enter a name of 1 to 256 characters')
      expect(res.body).toContain('value="not-an-email"')
      await signUp(t.app, 'taken@example.com')
      await client.get('/sign-up')
      const taken = await client.post('/sign-up', {
        email: 'TAKEN@example.com',
        password: 'not-the-owners-password',
        account_name: 'X',
      })
      expect(taken.statusCode).toBe(409)
      expect(taken.body).toContain('This email is already registered.')
      expect((await t.db.selectFrom('users').select('id').execute()).length).toBe(before + 1)
    })

    it('signs in with a new session id, refuses a wrong password, signs out', async () => {
      const { accountId } = await signUp(t.app, 'rotate@example.com')
      const client = webClient(t.app)
      await client.get('/sign-in')
      const wrong = await client.post('/sign-in', { email: 'rotate@example.com', password: 'wrong-password!' })
      expect(wrong.statusCode).toBe(401)
      expect(wrong.body).toContain('That email and password do not match an account.')
      client.cookies.set('sid', 'attacker-fixed-session')
      await client.get('/sign-in')
      const ok = await client.post('/sign-in', { email: 'rotate@example.com', password: 'correct-horse-battery' })
      expect(ok.statusCode).toBe(303)
      expect(client.cookies.get('sid')).not.toBe('attacker-fixed-session')
      expect((await client.get(`/app/${accountId}/settings/api`)).statusCode).toBe(200)
      const out = await client.post('/sign-out', {})
      expect(out.statusCode).toBe(303)
      expect(client.cookies.has('sid')).toBe(false)
      expect((await client.get(`/app/${accountId}/settings/api`)).headers.location).toBe('/sign-in')
    })

    it('signed-out visitors and API keys are sent to sign-in; API keys never open web pages', async () => {
      const acme = await t.createAccount()
      const res = await t.app.inject({
        method: 'GET',
        url: `/app/${acme.id}/settings/api`,
        headers: { authorization: `Bearer ${acme.key}` },
      })
      expect(res.statusCode).toBe(303)
      expect(res.headers.location).toBe('/sign-in')
      // Nor can an API key manage keys: create, revoke and roll change nothing.
      const keys = () => t.db.selectFrom('api_keys').selectAll().where('account_id', '=', acme.id).execute()
      const before = await keys()
      for (const url of ['keys', `keys/${acme.keyId}/revoke`, `keys/${acme.keyId}/roll`]) {
        const post = await t.app.inject({
          method: 'POST',
          url: `/app/${acme.id}/settings/api/${url}`,
          headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'name=Sneaky&scope=full&expires=never&overlap=now',
        })
        expect([403, 303]).toContain(post.statusCode)
      }
      expect(await keys()).toEqual(before)
    })

    it('a bad URL on a web page is a 400 page, not a 500 (cookies are not parsed yet there)', async () => {
      const { client, accountId } = await signUp(t.app, 'nul@example.com')
      const res = await client.get(`/app/${accountId}/contacts?q=%00`)
      expect(res.statusCode).toBe(400)
      expect(res.headers['content-type']).toContain('text/html')
      expect(res.body).toContain('U+0000')
      const badEscape = await client.get(`/app/${accountId}/contacts?q=%zz`)
      expect(badEscape.statusCode).toBe(400)
      expect(badEscape.headers['content-type']).toContain('text/html')
      expect(badEscape.body).toContain('percent-encoded')
    })

    it('a text/plain, XML or broken-JSON POST to sign-in, sign-up or sign-out is a 4xx page, never a 500', async () => {
      const bodies = [
        { type: 'text/plain', payload: 'email=a@example.com' },
        { type: 'application/xml', payload: '<a/>' },
        { type: 'application/json', payload: '{"email":' },
      ]
      for (const url of ['/sign-in', '/sign-up', '/sign-out']) {
        for (const { type, payload } of bodies) {
          const res = await t.app.inject({ method: 'POST', url, headers: { 'content-type': type }, payload })
          expect(res.statusCode, `${url} ${type}`).toBeGreaterThanOrEqual(400)
          expect(res.statusCode, `${url} ${type}`).toBeLessThan(500)
          expect(res.headers['content-type'], `${url} ${type}`).toContain('text/html')
        }
      }
    })

    it('sends security headers: CSP without unsafe-inline scripts, frame-ancestors none, nosniff', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/sign-in' })
      const csp = String(res.headers['content-security-policy'])
      expect(csp).toContain("script-src 'self'")
      expect(csp).not.toContain('unsafe-inline')
      expect(csp).toContain("frame-ancestors 'none'")
      expect(res.headers['x-content-type-options']).toBe('nosniff')
      expect(res.headers['x-frame-options']).toBe('DENY')
    })
  })

  describe('CSRF', () => {
    it('a state-changing post without the token, or with another session’s, is 403 and changes nothing', async () => {
      const { client, accountId } = await signUp(t.app, 'csrf@example.com')
      const other = await signUp(t.app, 'csrf-other@example.com')
      await other.client.get(`/app/${other.accountId}/settings/api`)
      const foreignToken = other.client.csrf()
      const before = await keyCount(accountId)
      for (const token of ['', 'forged', foreignToken]) {
        const res = await t.app.inject({
          method: 'POST',
          url: `/app/${accountId}/settings/api/keys`,
          headers: { cookie: `sid=${client.cookies.get('sid')}`, 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({ _csrf: token, name: 'X', scope: 'full', expires: 'never' }).toString(),
        })
        expect(res.statusCode).toBe(403)
        expect(res.body).toContain('Form expired')
      }
      expect(await keyCount(accountId)).toBe(before)
    })

    it('a multipart post, with or without a token, is refused before any handler except where a file is expected', async () => {
      const { client, accountId } = await signUp(t.app, 'multipart@example.com')
      const { key } = await createKey(client, accountId)
      const keyId = (await me(key)).json().api_key.id
      const sid = client.cookies.get('sid')
      await client.get(`/app/${accountId}/settings/api`)
      const boundary = 'csrfBoundary'
      const multipart = (fields: Record<string, string>) =>
        `${Object.entries(fields)
          .map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
          .join('')}--${boundary}--\r\n`
      const headers = { cookie: `sid=${sid}`, 'content-type': `multipart/form-data; boundary=${boundary}` }
      const bodies: Array<Record<string, string>> = [{}, { _csrf: client.csrf() }]
      for (const fields of bodies) {
        for (const url of [`/app/${accountId}/settings/api/keys/${keyId}/revoke`, '/sign-out']) {
          const res = await t.app.inject({ method: 'POST', url, headers, payload: multipart(fields) })
          expect(res.statusCode, url).toBe(403)
          expect(res.body).toContain('Form expired')
        }
      }
      // Nothing happened: the key works, the session is alive.
      expect((await me(key)).statusCode).toBe(200)
      expect((await client.get(`/app/${accountId}/settings/api`)).statusCode).toBe(200)
    })

    it('protects sign-in and sign-up forms too', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/sign-up',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'email=nocsrf%40example.com&password=correct-horse-battery&account_name=X',
      })
      expect(res.statusCode).toBe(403)
      expect(
        await t.db.selectFrom('users').select('id').where('email_lower', '=', 'nocsrf@example.com').executeTakeFirst(),
      ).toBeUndefined()
    })

    it('a post with an empty JSON body is refused like one without a token', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/sign-in',
        headers: { 'content-type': JSON_TYPE },
        payload: '',
      })
      expect(res.statusCode).toBe(403)
      expect(res.body).toContain('Form expired')
    })
  })

  describe('form input', () => {
    /** Posts a body as typed, with the pre-session cookie and CSRF token of a fresh visit to the form. */
    async function postRaw(url: string, contentType: string, body: (csrf: string) => string) {
      const client = webClient(t.app)
      await client.get(url)
      const headers = { cookie: `pre=${client.cookies.get('pre')}`, 'content-type': contentType }
      return t.app.inject({ method: 'POST', url, headers, payload: body(client.csrf()) })
    }

    it('reads a repeated field as empty and answers on the form page; U+0000 is dropped', async () => {
      const res = await postRaw(
        '/sign-up',
        FORM_TYPE,
        (csrf) => `_csrf=${csrf}&email=a%40example.com&email=b%40example.com&password=x&account_name=A%00cme`,
      )
      expect(res.statusCode).toBe(400)
      expect(res.headers['content-type']).toContain('text/html')
      expect(res.body).toContain('Enter a valid email address')
      expect(res.body).toContain('value="Acme"')
    })

    /** A multipart/form-data body of text fields, as a browser sends a form with that enctype. */
    function multipartBody(fields: Record<string, string>) {
      const boundary = '----webFormBoundary'
      const parts = Object.entries(fields).map(
        ([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
      )
      return { contentType: `multipart/form-data; boundary=${boundary}`, body: `${parts.join('')}--${boundary}--\r\n` }
    }

    // What the forms answered before they had body schemas: a field that is not text reads as '', so
    // a JSON body with a number, or a multipart body (whose fields no form route reads), gets the
    // form page with its message, and sign-out signs out; never the generic "Invalid parameter" page.
    it('answers a JSON field that is not text on the form page, and refuses a multipart body', async () => {
      const { client, accountId } = await signUp(t.app, 'form-input@example.com')
      const cases: {
        page: string
        url: string
        fields: Record<string, unknown>
        status: number
        says: string
        signedIn?: boolean
      }[] = [
        {
          page: '/sign-up',
          url: '/sign-up',
          fields: { email: 123, password: 'correcthorse1', account_name: 'J' },
          status: 400,
          says: 'Enter a valid email address',
        },
        {
          page: '/sign-in',
          url: '/sign-in',
          fields: { email: 5, password: 'correct-horse-battery' },
          status: 401,
          says: 'That email and password do not match an account.',
        },
        {
          page: '/app/accounts/new',
          url: '/app/accounts',
          fields: { name: 5 },
          status: 400,
          says: 'Enter a name of 1 to 256 characters.',
          signedIn: true,
        },
        {
          page: `/app/${accountId}/settings/members`,
          url: `/app/${accountId}/settings/members`,
          fields: { email: ['form-input@example.com'], role: 'member' },
          status: 400,
          says: 'Enter an email address, like name@example.com.',
          signedIn: true,
        },
      ]
      for (const [i, { page, url, fields, status, says, signedIn }] of cases.entries()) {
        const visitor = signedIn ? client : webClient(t.app)
        await visitor.get(page)
        const cookie = [...visitor.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
        // A fresh address for each: the sign-in failures count per client address too.
        const remoteAddress = `198.51.100.${10 + i}`
        const json = await t.app.inject({
          method: 'POST',
          url,
          remoteAddress,
          headers: { cookie, 'content-type': JSON_TYPE },
          payload: JSON.stringify({ _csrf: visitor.csrf(), ...fields }),
        })
        expect(json.statusCode, `JSON ${url}`).toBe(status)
        expect(json.headers['content-type']).toContain('text/html')
        expect(json.body, `JSON ${url}`).toContain(says)
        const { contentType, body } = multipartBody({ _csrf: visitor.csrf(), field: 'x' })
        const multi = await t.app.inject({
          method: 'POST',
          url,
          remoteAddress,
          headers: { cookie, 'content-type': contentType },
          payload: body,
        })
        // A multipart post goes only to a route that takes a file: refused before the handler.
        expect(multi.statusCode, `multipart ${url}`).toBe(403)
        expect(multi.body, `multipart ${url}`).toContain('Form expired')
      }
      expect(
        await t.db.selectFrom('users').select('id').where('email_lower', '=', '123').executeTakeFirst(),
      ).toBeUndefined()

      await client.get(`/app/${accountId}/settings/api`)
      const { contentType, body } = multipartBody({ _csrf: client.csrf() })
      const out = await t.app.inject({
        method: 'POST',
        url: '/sign-out',
        headers: { cookie: `sid=${client.cookies.get('sid')}`, 'content-type': contentType },
        payload: body,
      })
      // A multipart sign-out once took effect without its token being read: refused now.
      expect(out.statusCode).toBe(403)
      expect((await client.get(`/app/${accountId}/settings/api`)).statusCode).toBe(200)
    })
  })

  describe('Settings → API & Webhooks', () => {
    it('creates a key shown exactly once (no-store) that the API accepts; the page never shows it again', async () => {
      const { client, accountId } = await signUp(t.app, 'keys@example.com')
      const { res, key } = await createKey(client, accountId, { name: 'Billing sync' })
      expect(res.headers['cache-control']).toBe('no-store')
      expect(res.body).toContain('shown only this once')
      expect(res.body).toContain('Never put it in client-side code')
      const check = await me(key)
      expect(check.statusCode).toBe(200)
      expect(check.json()).toMatchObject({
        id: accountId,
        api_key: { name: 'Billing sync', scopes: ['read', 'write'] },
      })
      const page = await client.get(`/app/${accountId}/settings/api`)
      expect(page.body).not.toMatch(ANY_FULL_KEY)
      expect(page.body).toContain(`service_live_…${key.slice(-4)}`)
      expect(page.body).toContain('Billing sync')
    })

    it('read-only and expiring keys behave as chosen', async () => {
      const { client, accountId } = await signUp(t.app, 'scopes@example.com')
      const { key } = await createKey(client, accountId, { scope: 'read', expires: '7d' })
      expect((await me(key)).json().api_key.scopes).toEqual(['read'])
      const write = await t.app.inject({
        method: 'POST',
        url: '/api/v1/contacts',
        headers: { authorization: `Bearer ${key}` },
        payload: { email: 'x@example.com' },
      })
      expect(write.statusCode).toBe(403)
      clock.advance(7 * 24 * 3600 * 1000 + 1)
      expect((await me(key)).statusCode).toBe(401)
    })

    it('refuses a bad create form with a message and creates nothing', async () => {
      const { client, accountId } = await signUp(t.app, 'badkey@example.com')
      await client.get(`/app/${accountId}/settings/api`)
      const res = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: '   ',
        scope: 'full',
        expires: 'never',
      })
      expect(res.statusCode).toBe(400)
      expect(res.body).toContain('Give the key a name of 1 to 100 characters.')
      const long = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: 'x'.repeat(101),
        scope: 'full',
        expires: 'never',
      })
      expect(long.statusCode).toBe(400)
      expect(long.body).toContain('Give the key a name of 1 to 100 characters.')
      const odd = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: 'X',
        scope: 'admin',
        expires: 'never',
      })
      expect(odd.statusCode).toBe(400)
      // Inherited property names are not choices (they were read with `in` and gave a 500).
      const inherited = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: 'X',
        scope: 'full',
        expires: 'toString',
      })
      expect(inherited.statusCode).toBe(400)
      expect(inherited.body).toContain('Choose the access and expiry from the lists.')
      expect(await keyCount(accountId)).toBe(0)
    })

    it('revokes after confirmation: the key gets 401 at once', async () => {
      const { client, accountId } = await signUp(t.app, 'revoke@example.com')
      const { key } = await createKey(client, accountId)
      expect((await me(key)).statusCode).toBe(200) // now cached by the verifier
      const keyId = (await me(key)).json().api_key.id
      await t.deps.keyVerifier.flush()
      const confirm = await client.get(`/app/${accountId}/settings/api/keys/${keyId}/revoke`)
      expect(confirm.statusCode).toBe(200)
      expect(confirm.body).toContain('Revoke “Production”?')
      expect(confirm.body).toContain('It made 2 requests')
      const res = await client.post(`/app/${accountId}/settings/api/keys/${keyId}/revoke`, {})
      expect(res.statusCode).toBe(303)
      expect((await me(key)).statusCode).toBe(401)
      const page = await client.get(String(res.headers.location))
      expect(page.body).toContain('The key was revoked.')
      expect(page.body).toMatch(/<span class="status revoked">revoked<\/span>/)
      // A prototype name is no notice (a plain object lookup showed the function's source).
      const odd = await client.get(`/app/${accountId}/settings/api?notice=constructor`)
      expect(odd.statusCode).toBe(200)
      expect(odd.body).not.toMatch(/native code|role="status"/)
    })

    it('a revocation whose push to other instances fails still succeeds (their cache TTL bounds it)', async () => {
      const { client, accountId } = await signUp(t.app, 'lost-push@example.com')
      const { key } = await createKey(client, accountId)
      const keyId = (await me(key)).json().api_key.id
      const revocations = t.deps.keyRevocations
      const publish = revocations.publish
      // As a Redis or PostgreSQL push that fails: this instance's cache is dropped, the send is not.
      revocations.publish = async (keyHash) => (await publish.call(revocations, keyHash)) && false
      try {
        const res = await client.post(`/app/${accountId}/settings/api/keys/${keyId}/revoke`, {})
        expect(res.statusCode).toBe(303)
        expect((await me(key)).statusCode).toBe(401)
      } finally {
        revocations.publish = publish
      }
    })

    it('rolls with a 1 h overlap: both keys work, the old one stops after the hour; "now" stops it at once', async () => {
      const { client, accountId } = await signUp(t.app, 'roll@example.com')
      const { key: oldKey } = await createKey(client, accountId)
      const oldId = (await me(oldKey)).json().api_key.id
      await client.get(`/app/${accountId}/settings/api`)
      const rolled = await client.post(`/app/${accountId}/settings/api/keys/${oldId}/roll`, { overlap: '1h' })
      const { page: rolledPage, key: newKey } = await shownOnce(client, rolled)
      expect(rolledPage.body).toContain('It replaces')
      expect(newKey).not.toBe(oldKey)
      expect((await me(oldKey)).statusCode).toBe(200)
      expect((await me(newKey)).statusCode).toBe(200)
      expect((await me(oldKey)).json().api_key.expires_at).toBe(
        new Date(clock.now().getTime() + 3600_000).toISOString(),
      )
      clock.advance(3600_000)
      expect((await me(oldKey)).statusCode).toBe(401)
      expect((await me(newKey)).statusCode).toBe(200)

      const newId = (await me(newKey)).json().api_key.id
      await client.get(`/app/${accountId}/settings/api`)
      // An inherited property name is not an overlap choice (read with `in`, it gave a 500).
      const inherited = await client.post(`/app/${accountId}/settings/api/keys/${newId}/roll`, { overlap: 'toString' })
      expect(inherited.statusCode).toBe(404)
      expect((await me(newKey)).statusCode).toBe(200)
      // "Now" asks first, like a revoke: the first POST only shows the question.
      const asked = await client.post(`/app/${accountId}/settings/api/keys/${newId}/roll`, { overlap: 'now' })
      expect(asked.statusCode).toBe(200)
      expect(asked.body).toContain('stops working at once')
      expect(shownKey(asked.body)).toBeUndefined()
      expect((await me(newKey)).statusCode).toBe(200)
      const now = await client.post(`/app/${accountId}/settings/api/keys/${newId}/roll`, {
        overlap: 'now',
        confirm: 'yes',
      })
      expect((await me(newKey)).statusCode).toBe(401)
      expect((await me((await shownOnce(client, now)).key)).statusCode).toBe(200)
    })

    it('writes every key change to the audit log, shown on the page, and limits them to 30 an hour', async () => {
      const { client, accountId } = await signUp(t.app, 'audit@example.com')
      const { key } = await createKey(client, accountId)
      const keyId = (await me(key)).json().api_key.id
      const rolled = await client.post(`/app/${accountId}/settings/api/keys/${keyId}/roll`, {
        overlap: 'now',
        confirm: 'yes',
      })
      const newKeyId = (await me((await shownOnce(client, rolled)).key)).json().api_key.id
      expect((await client.post(`/app/${accountId}/settings/api/keys/${newKeyId}/revoke`, {})).statusCode).toBe(303)

      const user = await t.db
        .selectFrom('users')
        .select('id')
        .where('email_lower', '=', 'audit@example.com')
        .executeTakeFirstOrThrow()
      const log = await t.db
        .selectFrom('audit_log')
        .selectAll()
        .where('account_id', '=', accountId)
        .orderBy('id')
        .execute()
      expect(log.map(({ action, target_id, actor_user_id, ip }) => ({ action, target_id, actor_user_id, ip }))).toEqual(
        [
          { action: 'api_key.created', target_id: keyId, actor_user_id: user.id, ip: '127.0.0.1' },
          { action: 'api_key.rolled', target_id: keyId, actor_user_id: user.id, ip: '127.0.0.1' },
          { action: 'api_key.revoked', target_id: newKeyId, actor_user_id: user.id, ip: '127.0.0.1' },
        ],
      )
      expect(JSON.parse(log[1]?.detail ?? '{}')).toMatchObject({ name: 'Production', new_key_id: newKeyId })
      const page = (await client.get(`/app/${accountId}/settings/api`)).body
      expect(page).toContain('Key activity')
      expect([...page.matchAll(/<td[^>]*>(Key (?:created|rolled|revoked))<\/td>/g)].map((m) => m[1])).toEqual([
        'Key revoked',
        'Key rolled',
        'Key created',
      ])
      expect(page).toContain('audit@example.com')

      // 28 more keys make 30 issued (created or rolled) by this person in the hour; the next is
      // refused and changes nothing, while a revoke is never refused.
      for (let i = 0; i < 28; i++) {
        await createKey(client, accountId, { name: `Key ${i}` })
      }
      const keysBefore = await t.db.selectFrom('api_keys').select('id').where('account_id', '=', accountId).execute()
      const refused = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: 'One too many',
        scope: 'full',
        expires: 'never',
      })
      expect(refused.statusCode).toBe(429)
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0)
      expect(refused.body).toContain('You have issued 30 keys in this account in the last hour')
      expect(await t.db.selectFrom('api_keys').select('id').where('account_id', '=', accountId).execute()).toEqual(
        keysBefore,
      )
      expect(
        await t.db.selectFrom('audit_log').select('id').where('account_id', '=', accountId).execute(),
      ).toHaveLength(31)
      const last = keysBefore.at(-1)?.id ?? ''
      const revoked = await client.post(`/app/${accountId}/settings/api/keys/${last}/revoke`, {})
      expect(revoked.statusCode).toBe(303)

      clock.advance(3600_000)
      await createKey(client, accountId, { name: 'An hour later' })
    })

    it('shows requests per day for each key over 14 days', async () => {
      const { client, accountId } = await signUp(t.app, 'usage@example.com')
      const { key } = await createKey(client, accountId)
      for (let i = 0; i < 7; i++) {
        await me(key)
      }
      await t.deps.keyVerifier.flush()
      const page = await client.get(`/app/${accountId}/settings/api`)
      expect(page.body).toContain('aria-label="7 requests in the last 14 days"')
      expect(page.body).toContain(`<title>${clock.now().toISOString().slice(0, 10)}: 7</title>`)
    })
  })

  describe('accounts and access', () => {
    it("another person's account, key or page is a 404, and nothing changes", async () => {
      const alice = await signUp(t.app, 'alice@example.com', 'Alice Co')
      const bob = await signUp(t.app, 'bob@example.com', 'Bob Co')
      const { key } = await createKey(alice.client, alice.accountId)
      const aliceKeyId = (await me(key)).json().api_key.id
      for (const url of [
        `/app/${alice.accountId}/settings/api`,
        `/app/${alice.accountId}/contacts`,
        `/app/${bob.accountId}/settings/api/keys/${aliceKeyId}/revoke`,
      ]) {
        const res = await bob.client.get(url)
        expect(res.statusCode, url).toBe(404)
        expect(res.body).not.toContain('Alice Co')
      }
      await bob.client.get(`/app/${bob.accountId}/settings/api`)
      for (const url of [
        `/app/${alice.accountId}/settings/api/keys/${aliceKeyId}/revoke`,
        `/app/${bob.accountId}/settings/api/keys/${aliceKeyId}/revoke`,
        `/app/${bob.accountId}/settings/api/keys/${aliceKeyId}/roll`,
      ]) {
        expect((await bob.client.post(url, { overlap: 'now' })).statusCode, url).toBe(404)
      }
      expect((await me(key)).statusCode).toBe(200)
    })

    /** The app on the same deps, whose database calls are recorded (each query's tree, as JSON). */
    async function watchedApp() {
      const queries: string[] = []
      const watch: KyselyPlugin = {
        transformQuery({ node }) {
          queries.push(JSON.stringify(node))
          return node
        },
        transformResult: async ({ result }) => result,
      }
      const app = await buildApp(
        { ...t.deps, database: { ...t.deps.database, db: t.db.withPlugin(watch) } },
        { logger: false },
      )
      return { app, queries }
    }

    it('an account page reads the person’s memberships once (sign-in loads them; the account check reuses them)', async () => {
      const { client, accountId } = await signUp(t.app, 'one-query@example.com')
      const other = await signUp(t.app, 'one-query-other@example.com')
      const { app, queries } = await watchedApp()
      const membershipQueries = () => queries.filter((q) => q.includes('"name":"memberships"')).length
      try {
        const page = await app.inject({
          method: 'GET',
          url: `/app/${accountId}/contacts`,
          cookies: { sid: client.cookies.get('sid') ?? '' },
        })
        expect(page.statusCode).toBe(200)
        expect(membershipQueries()).toBe(1)
        queries.length = 0
        const foreign = await app.inject({
          method: 'GET',
          url: `/app/${other.accountId}/contacts`,
          cookies: { sid: client.cookies.get('sid') ?? '' },
        })
        expect(foreign.statusCode).toBe(404)
        expect(membershipQueries()).toBe(1)
      } finally {
        await app.close()
      }
    })

    it('inviting a member never reads the people table: registered or not, the answer is the same', async () => {
      const owner = await signUp(t.app, 'hash-owner@example.com')
      await signUp(t.app, 'hash-member@example.com')
      const { app, queries } = await watchedApp()
      try {
        await owner.client.get(`/app/${owner.accountId}/settings/members`)
        for (const email of ['hash-member@example.com', 'nobody-here@example.com']) {
          const res = await app.inject({
            method: 'POST',
            url: `/app/${owner.accountId}/settings/members`,
            cookies: { sid: owner.client.cookies.get('sid') ?? '' },
            payload: { _csrf: owner.client.csrf(), email, role: 'member' },
          })
          expect(res.statusCode, email).toBe(303)
        }
        const users = queries.filter((q) => q.includes('"name":"users"'))
        expect(users.filter((q) => q.includes('password_hash') || q.includes('"kind":"SelectAllNode"'))).toEqual([])
      } finally {
        await app.close()
      }
    })

    it('a person can own several accounts, switch between them, and add members', async () => {
      const owner = await signUp(t.app, 'multi@example.com', 'First <b>Co</b>')
      await owner.client.get('/app/accounts/new')
      const created = await owner.client.post('/app/accounts', { name: 'Second Co' })
      expect(created.statusCode).toBe(303)
      const secondId = /\/app\/(acct_[0-9A-Z]+)\//.exec(String(created.headers.location))?.[1] as string
      const page = await owner.client.get(`/app/${secondId}/settings/api`)
      expect(page.body).toContain('First &lt;b&gt;Co&lt;/b&gt;')
      expect(page.body).toContain(`href="/app/${owner.accountId}/contacts"`)

      const member = await signUp(t.app, 'member@example.com', 'Member Co')
      expect((await member.client.get(`/app/${secondId}/settings/api`)).statusCode).toBe(404)
      await owner.client.get(`/app/${secondId}/settings/members`)
      const invited = await owner.client.post(`/app/${secondId}/settings/members`, {
        email: 'MEMBER@example.com',
        role: 'member',
      })
      expect(invited.statusCode).toBe(303)
      const link = /id="invitation-link" type="text" readonly value="([^"]+)"/.exec(
        (await owner.client.get(String(invited.headers.location))).body,
      )?.[1] as string
      const path = new URL(link).pathname
      await member.client.get(path)
      expect((await member.client.post(`${path}/accept`, {})).statusCode).toBe(303)
      expect((await member.client.get(`/app/${secondId}/settings/api`)).statusCode).toBe(200)
      // A member cannot invite members.
      await member.client.get(`/app/${secondId}/contacts`)
      expect(
        (await member.client.post(`/app/${secondId}/settings/members`, { email: 'alice@example.com', role: 'admin' }))
          .statusCode,
      ).toBe(403)
    })
  })
})

describe('web session cookie behind https', () => {
  it('is Secure when APP_URL is https', async () => {
    const t = await createTestHarness({ dialect: 'sqlite', env: { APP_URL: 'https://app.example.com' } })
    try {
      const client = webClient(t.app)
      await client.get('/sign-up')
      const res = await client.post('/sign-up', {
        email: 'secure@example.com',
        password: 'correct-horse-battery',
        account_name: 'S',
      })
      expect(res.cookies.find((c) => c.name === 'sid')?.secure).toBe(true)
      expect(String(res.headers['strict-transport-security'])).toContain('max-age=')
    } finally {
      await t.close()
    }
  })
})
