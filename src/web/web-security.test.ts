// The web app against forged requests and abuse: the same-origin check (CSRF's second line), the
// sign-in and sign-up throttles, the limit on accounts per person, and bodies no form sends.
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp, type WebClient, webClient } from '../../test/web-client.js'
import { buildApp } from '../app.js'
import { manualClock } from '../lib/clock.js'
import { purgeSignInFailures, SIGN_IN_POLICIES, SIGN_IN_WINDOW_MS } from '../rate-limit/sign-in-throttle.js'

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

  /** A sign-in (or sign-up) form post from a client address, with a fresh page's cookie and token. */
  async function postForm(url: string, remoteAddress: string, fields: Record<string, string>) {
    const client = webClient(t.app)
    await client.get(url)
    return t.app.inject({
      method: 'POST',
      url,
      remoteAddress,
      headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'content-type': FORM_TYPE },
      payload: new URLSearchParams({ _csrf: client.csrf(), ...fields }).toString(),
    })
  }
  const signIn = (remoteAddress: string, email: string, password: string) =>
    postForm('/sign-in', remoteAddress, { email, password })
  const RIGHT = 'correct-horse-battery' // test/web-client.ts signs everyone up with it

  describe('sign-in throttle', () => {
    it('the owner gets in from their own address while an attacker hammers the same email from another', async () => {
      await signUp(t.app, 'hammered@example.com')
      const attacker = '203.0.113.66'
      let failures = 0
      let refused = 0
      // Thirty failures, waiting out each delay in between: the delays grow to the 15-minute cap.
      while (failures < 30) {
        const res = await signIn(attacker, 'hammered@example.com', `guess-${failures}-xxxxxx`)
        if (res.statusCode === 429) {
          refused++
          clock.advance(Number(res.headers['retry-after']) * 1000)
        } else {
          expect(res.statusCode).toBe(401)
          failures++
        }
      }
      expect(refused).toBeGreaterThan(0)
      const last = await signIn(attacker, 'hammered@example.com', 'another-guess-xxxx')
      expect(last.statusCode).toBe(429)
      expect(Number(last.headers['retry-after'])).toBe(SIGN_IN_POLICIES.pair.maxDelayS)
      expect(last.body).toContain('Try again in 15 minutes.')
      // Even the right password waits on the attacker's pair…
      expect((await signIn(attacker, 'hammered@example.com', RIGHT)).statusCode).toBe(429)
      // …but the owner, from their own address, gets in at once: no per-email lock.
      const owner = await signIn('198.51.100.7', 'hammered@example.com', RIGHT)
      expect(owner.statusCode).toBe(303)
      expect(owner.headers.location).toBe('/app')
    })

    it('per pair: 5 failures free, then the wait doubles (2 s, 4 s, 8 s); the right password forgives them', async () => {
      await signUp(t.app, 'typo@example.com')
      const here = '198.51.100.20'
      for (let i = 0; i < SIGN_IN_POLICIES.pair.free; i++) {
        expect((await signIn(here, 'typo@example.com', `typo-${i}-xxxxxx`)).statusCode).toBe(401)
      }
      for (const wait of [2, 4, 8]) {
        const refused = await signIn(here, 'Typo@Example.com', RIGHT)
        expect(refused.statusCode).toBe(429)
        expect(refused.headers['retry-after']).toBe(String(wait))
        expect(refused.body).toContain(`Try again in ${wait} seconds.`)
        clock.advance(wait * 1000 - 1000)
        expect((await signIn(here, 'typo@example.com', RIGHT)).statusCode, 'a second early').toBe(429)
        clock.advance(1000)
        if (wait < 8) {
          expect((await signIn(here, 'typo@example.com', 'still-wrong-xxxx')).statusCode).toBe(401)
        }
      }
      expect((await signIn(here, 'typo@example.com', RIGHT)).statusCode).toBe(303)
      // Forgiven: the next typo is free again.
      expect((await signIn(here, 'typo@example.com', 'one-more-typo-xx')).statusCode).toBe(401)
      expect((await signIn(here, 'typo@example.com', RIGHT)).statusCode).toBe(303)
    })

    it('per address: 20 failures over any emails, then growing waits for every email from it (IPv6: its /64)', async () => {
      await signUp(t.app, 'sprayed@example.com')
      for (let i = 0; i < SIGN_IN_POLICIES.address.free; i++) {
        const res = await signIn(`2001:db8:77:1::${i + 1}`, `spray-${i}@example.com`, 'spray-password-x')
        expect(res.statusCode).toBe(401)
      }
      const refused = await signIn('2001:db8:77:1::ffff', 'sprayed@example.com', RIGHT)
      expect(refused.statusCode).toBe(429)
      expect(refused.headers['retry-after']).toBe('2')
      // Another /64, and the owner's own address, are not slowed.
      expect((await signIn('2001:db8:77:2::1', 'sprayed@example.com', RIGHT)).statusCode).toBe(303)
    })

    it('a burst of concurrent guesses cannot all pass before the first is counted', async () => {
      await signUp(t.app, 'burst@example.com')
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => signIn('192.0.2.99', 'burst@example.com', `burst-${i}-xxxxxx`)),
      )
      const checked = results.filter((r) => r.statusCode === 401).length
      expect(results.every((r) => r.statusCode === 401 || r.statusCode === 429)).toBe(true)
      // On PostgreSQL's pool the guesses are truly concurrent and all may be refused: refusing is safe.
      expect(checked).toBeLessThanOrEqual(SIGN_IN_POLICIES.pair.free + 1)
    })

    it('counts in the database: another instance throttles alike; neither the email nor the address is kept', async () => {
      await signUp(t.app, 'shared-throttle@example.com')
      const second = await buildApp(t.deps, { logger: false }) // a second instance on the same database
      try {
        for (let i = 0; i < SIGN_IN_POLICIES.pair.free; i++) {
          expect((await signIn('192.0.2.50', 'Shared-Throttle@example.com', `nope-${i}-xxxx`)).statusCode).toBe(401)
        }
        const other = webClient(second)
        await other.get('/sign-in')
        const res = await second.inject({
          method: 'POST',
          url: '/sign-in',
          remoteAddress: '192.0.2.50',
          headers: { cookie: `pre=${other.cookies.get('pre')}`, 'content-type': FORM_TYPE },
          payload: new URLSearchParams({
            _csrf: other.csrf(),
            email: 'shared-throttle@example.com',
            password: RIGHT,
          }).toString(),
        })
        expect(res.statusCode).toBe(429)
        const stored = JSON.stringify(await t.db.selectFrom('sign_in_failures').selectAll().execute())
        expect(stored).not.toMatch(/shared-throttle|example\.com|192\.0\.2/i)
      } finally {
        await second.close()
      }
      // A day later every failure row goes in the hourly purge.
      clock.advance(SIGN_IN_WINDOW_MS + 1)
      expect(await purgeSignInFailures(t.db, clock.now(), SIGN_IN_WINDOW_MS)).toBeGreaterThanOrEqual(5)
      expect(await t.db.selectFrom('sign_in_failures').selectAll().execute()).toEqual([])
    })
  })

  it('a text/plain, XML or broken-JSON post to sign-in, sign-up or sign-out is a 4xx page and logs no error', async () => {
    const lines: string[] = []
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean))
        done()
      },
    })
    const app = await buildApp({ ...t.deps, config: { ...t.deps.config, logLevel: 'info' } }, { logStream })
    try {
      const { client } = await signUp(app, 'bodies@example.com')
      const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
      const bodies = [
        { type: 'text/plain', payload: `_csrf=${client.csrf()}&email=a@example.com` },
        { type: 'application/xml', payload: '<sign-in><email>a@example.com</email></sign-in>' },
        { type: 'application/json', payload: '{"email":' },
        { type: 'application/json', payload: '' },
        { type: 'application/x-www-form-urlencoded; charset=utf-16', payload: 'email=x' },
      ]
      for (const url of ['/sign-in', '/sign-up', '/sign-out']) {
        for (const { type, payload } of bodies) {
          const res = await app.inject({ method: 'POST', url, headers: { 'content-type': type, cookie }, payload })
          expect(res.statusCode, `${url} ${type}`).toBeGreaterThanOrEqual(400)
          expect(res.statusCode, `${url} ${type}`).toBeLessThan(500)
          expect(res.headers['content-type'], `${url} ${type}`).toContain('text/html')
        }
      }
      // Still signed in: none of them was taken as a sign-out.
      const home = await client.get('/app')
      expect(home.statusCode).toBe(303)
      expect(home.headers.location).toMatch(/^\/app\/acct_/)
      expect(lines.length).toBeGreaterThan(0)
      const levels = lines.map((line) => (JSON.parse(line) as { level: number }).level)
      expect(levels.filter((level) => level >= 50)).toEqual([])
    } finally {
      await app.close()
    }
  })
})

describe.each(testDialects())('sign-up limits on %s', (dialect) => {
  const clock = manualClock(new Date())
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock, env: { SIGN_UPS_PER_HOUR: '3', MAX_ACCOUNTS_PER_PERSON: '2' } })
  })
  afterAll(() => t.close())

  async function signUpFrom(remoteAddress: string, email: string, password = 'correct-horse-battery') {
    const client = webClient(t.app)
    await client.get('/sign-up')
    const res = await t.app.inject({
      method: 'POST',
      url: '/sign-up',
      remoteAddress,
      headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'content-type': FORM_TYPE },
      payload: new URLSearchParams({ _csrf: client.csrf(), email, password, account_name: 'Co' }).toString(),
    })
    return res
  }
  const userCount = async () => (await t.db.selectFrom('users').select('id').execute()).length
  // Accounts, not their test environments (src/accounts/tenant.ts).
  const accountCount = async () =>
    (await t.db.selectFrom('accounts').select('id').where('id', 'not like', '%_test').execute()).length

  it('3 sign-ups an hour per address (IPv6: per /64), then a 429 page that says when to retry', async () => {
    for (const i of [1, 2, 3]) {
      expect((await signUpFrom(`2001:db8:5:6::${i}`, `hourly-${i}@example.com`)).statusCode).toBe(303)
    }
    const before = await userCount()
    const refused = await signUpFrom('2001:db8:5:6::ffff', 'hourly-4@example.com')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('3600')
    expect(refused.headers['content-type']).toContain('text/html')
    expect(refused.body).toContain('Too many attempts from your network. Try again in 60 minutes.')
    expect(refused.body).toContain('value="hourly-4@example.com"')
    expect(await userCount()).toBe(before)
    // Another /64 is another budget; an hour later this one is free again.
    expect((await signUpFrom('2001:db8:5:7::1', 'hourly-5@example.com')).statusCode).toBe(303)
    clock.advance(3600_000)
    expect((await signUpFrom('2001:db8:5:6::1', 'hourly-6@example.com')).statusCode).toBe(303)
  })

  it('250 sign-ups at once from one address make 3 accounts', async () => {
    const before = await accountCount()
    const results = await Promise.all(
      Array.from({ length: 250 }, (_, i) => signUpFrom('192.0.2.250', `flood-${i}@example.com`)),
    )
    const created = results.filter((r) => r.statusCode === 303).length
    expect(results.filter((r) => r.statusCode === 429).length).toBe(250 - created)
    expect(created).toBeLessThanOrEqual(3)
    expect(await accountCount()).toBe(before + created)
  })

  it('a registered email: a wrong password only says it is registered; the right one signs in and adds the account', async () => {
    await signUpFrom('192.0.2.10', 'known@example.com')
    const before = { users: await userCount(), accounts: await accountCount() }
    const wrong = await signUpFrom('192.0.2.11', 'Known@example.com', 'not-the-password')
    expect(wrong.statusCode).toBe(409)
    expect(wrong.body).toContain('This email is already registered. Sign in with its password, or use another email.')
    expect(wrong.cookies.find((c) => c.name === 'sid')).toBeUndefined()
    const right = await signUpFrom('192.0.2.12', 'known@example.com')
    expect(right.statusCode).toBe(303)
    expect(right.headers.location).toMatch(/^\/app\/acct_\w+\/contacts$/)
    expect(right.cookies.find((c) => c.name === 'sid')).toBeDefined()
    expect(await userCount()).toBe(before.users)
    expect(await accountCount()).toBe(before.accounts + 1)
  })

  it('a registered email is a password check: wrong passwords through sign-up are throttled like sign-in', async () => {
    await signUpFrom('192.0.2.20', 'guessed@example.com')
    // Five wrong passwords from one address, over two hours (its sign-up budget is 3 an hour).
    const from = '192.0.2.21'
    for (const tries of [3, 2]) {
      clock.advance(3600_000)
      for (let i = 0; i < tries; i++) {
        expect((await signUpFrom(from, 'guessed@example.com', `guess-${tries}-${i}-xxxxx`)).statusCode).toBe(409)
      }
    }
    const refused = await signUpFrom(from, 'guessed@example.com', 'correct-horse-battery')
    expect(refused.statusCode).toBe(429)
    // And the sign-in form sees the same failures.
    expect((await signIn(from, 'guessed@example.com', 'correct-horse-battery')).statusCode).toBe(429)
  })

  async function signIn(remoteAddress: string, email: string, password: string) {
    const client = webClient(t.app)
    await client.get('/sign-in')
    return t.app.inject({
      method: 'POST',
      url: '/sign-in',
      remoteAddress,
      headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'content-type': FORM_TYPE },
      payload: new URLSearchParams({ _csrf: client.csrf(), email, password }).toString(),
    })
  }

  it('a person owns at most MAX_ACCOUNTS_PER_PERSON accounts: the next is a 403 page and is not created', async () => {
    const { client } = await signUp(t.app, 'owner-of-two@example.com')
    await client.get('/app/accounts/new')
    expect((await client.post('/app/accounts', { name: 'Second' })).statusCode).toBe(303)
    const before = await accountCount()
    await client.get('/app/accounts/new')
    const third = await client.post('/app/accounts', { name: 'Third' })
    expect(third.statusCode).toBe(403)
    expect(third.headers['content-type']).toContain('text/html')
    expect(third.body).toContain('You already own 2 accounts, the most one person may own.')
    // Nor through sign-up with the right password.
    clock.advance(3600_000)
    const viaSignUp = await signUpFrom('192.0.2.30', 'owner-of-two@example.com')
    expect(viaSignUp.statusCode).toBe(403)
    expect(await accountCount()).toBe(before)
  })
})
