// The web app against forged requests and abuse: the same-origin check (CSRF's second line), the
// sign-in and sign-up throttles, the limit on accounts per person, and bodies no form sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp, type WebClient } from '../../test/web-client.js'
import { manualClock } from '../lib/clock.js'

const FORM_TYPE = 'application/x-www-form-urlencoded'

describe.each(testDialects())('web security on %s', (dialect) => {
  const clock = manualClock(new Date())
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock })
  })
  afterAll(() => t.close())

  /** A post with the client's cookies and a valid token, plus the headers a browser (or forger) adds. */
  const forged = (client: WebClient, url: string, headers: Record<string, string>, fields = {}) =>
    t.app.inject({
      method: 'POST',
      url,
      headers: {
        cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        'content-type': FORM_TYPE,
        ...headers,
      },
      payload: new URLSearchParams({ _csrf: client.csrf(), ...fields }).toString(),
    })
  const keyCount = async (accountId: string) =>
    (await t.db.selectFrom('api_keys').select('id').where('account_id', '=', accountId).execute()).length

  describe('same-origin check', () => {
    it('refuses a post from another site, a sibling subdomain or another port, even with a valid token', async () => {
      const { client, accountId } = await signUp(t.app, 'origin@example.com')
      await client.get(`/app/${accountId}/settings/api`)
      const createKey = { name: 'Forged', scope: 'full', expires: 'never' }
      const refused: Record<string, string>[] = [
        { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
        // A sibling subdomain is same-site: SameSite=Lax cookies go with its posts.
        { 'sec-fetch-site': 'same-site' },
        { 'sec-fetch-site': 'same-site', origin: 'http://evil.api.test' },
        // Browsers without Fetch Metadata: the Origin alone.
        { origin: 'https://evil.example' },
        { origin: 'http://api.test:8080' }, // another port of the app's host
        { origin: 'https://api.test' }, // another scheme
        { origin: 'null' }, // a sandboxed frame or an opaque redirect
      ]
      for (const headers of refused) {
        const res = await forged(client, `/app/${accountId}/settings/api/keys`, headers, createKey)
        expect(res.statusCode, JSON.stringify(headers)).toBe(403)
        expect(res.headers['content-type']).toContain('text/html')
        expect(res.body).toContain('sent from another site')
      }
      expect(await keyCount(accountId)).toBe(0)
      // Sign-out from another site signs no one out.
      expect((await forged(client, '/sign-out', { origin: 'https://evil.example' })).statusCode).toBe(403)
      expect((await client.get(`/app/${accountId}/settings/api`)).statusCode).toBe(200)
    })

    it('refuses a cross-site multipart upload before its handler reads it', async () => {
      const { client, accountId } = await signUp(t.app, 'origin-upload@example.com')
      await client.get(`/app/${accountId}/contacts/import`)
      const boundary = '----forged'
      const body = [
        `--${boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${client.csrf()}\r\n`,
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.csv"\r\nContent-Type: text/csv\r\n\r\nemail\r\nforged@example.com\r\n`,
        `--${boundary}--\r\n`,
      ].join('')
      const res = await t.app.inject({
        method: 'POST',
        url: `/app/${accountId}/contacts/import`,
        headers: {
          cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'sec-fetch-site': 'cross-site',
        },
        payload: body,
      })
      expect(res.statusCode).toBe(403)
      expect(await t.db.selectFrom('contacts').select('id').where('account_id', '=', accountId).execute()).toEqual([])
    })

    it('lets through the app’s own origin (APP_URL or the address asked), same-origin, and clients that send neither', async () => {
      const { client, accountId } = await signUp(t.app, 'origin-ok@example.com')
      const page = await client.get(`/app/${accountId}/settings/api`)
      // Under helmet's default no-referrer, browsers send `Origin: null` on the app's own posts.
      expect(page.headers['referrer-policy']).toBe('same-origin')
      const allowed: Record<string, string>[] = [
        { origin: 'http://api.test' }, // APP_URL (defaults to API_URL)
        { origin: 'http://localhost' }, // the Host the request was sent to (inject's default)
        { 'sec-fetch-site': 'same-origin', origin: 'http://api.test' },
        { 'sec-fetch-site': 'none' }, // typed into the address bar, no page involved
        {}, // curl and other non-browser clients: the token decides
      ]
      for (const [i, headers] of allowed.entries()) {
        const res = await forged(client, `/app/${accountId}/settings/api/keys`, headers, {
          name: `Key ${i}`,
          scope: 'read',
          expires: 'never',
        })
        expect(res.statusCode, JSON.stringify(headers)).toBe(303)
        await client.get(String(res.headers.location))
      }
      expect(await keyCount(accountId)).toBe(allowed.length)
      // The token is still required when the origin is right.
      const noToken = await t.app.inject({
        method: 'POST',
        url: `/app/${accountId}/settings/api/keys`,
        headers: {
          cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          'content-type': FORM_TYPE,
          origin: 'http://api.test',
          'sec-fetch-site': 'same-origin',
        },
        payload: 'name=X&scope=full&expires=never',
      })
      expect(noToken.statusCode).toBe(403)
      expect(noToken.body).toContain('Form expired')
      expect(await keyCount(accountId)).toBe(allowed.length)
    })
  })
})
