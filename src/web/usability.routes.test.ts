// The web app's usability promises (docs/web-app.md) through HTTP on every dialect: sign-up and
// sign-in land on the same page; an invitation link brings the person back by a `next` that is only
// ever a path of this app; the keys page shows a use at once; Settings' tabs on each of its pages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { inviteAndAccept, shownKey, signUp, type WebClient, webClient } from '../../test/web-client.js'

const PASSWORD = 'correct-horse-battery'

/** The invitation link's path, from the owner's members form (shown once on the page it redirects to). */
async function invitationPath(owner: WebClient, accountId: string, email: string): Promise<string> {
  await owner.get(`/app/${accountId}/settings/members`)
  const res = await owner.post(`/app/${accountId}/settings/members`, { email, role: 'member' })
  expect(res.statusCode).toBe(303)
  const page = await owner.get(String(res.headers.location))
  const link = /id="invitation-link" type="text" readonly value="([^"]+)"/.exec(page.body)?.[1]
  return new URL(link as string).pathname
}

/** The hidden inputs and links of a page that carry `next`. */
const carriedNext = (body: string) => ({
  input: /<input type="hidden" name="next" value="([^"]*)">/.exec(body)?.[1],
  links: [...body.matchAll(/href="(\/sign-(?:in|up)\?[^"]*)"/g)].map((m) => (m[1] ?? '').replaceAll('&amp;', '&')),
})

describe.each(testDialects())('web app usability on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  async function signIn(email: string, fields: Record<string, string> = {}) {
    const client = webClient(t.app)
    await client.get('/sign-in')
    return { client, res: await client.post('/sign-in', { email, password: PASSWORD, ...fields }) }
  }

  it('sign-up and sign-in land on the same page: the account’s contacts', async () => {
    const client = webClient(t.app)
    await client.get('/sign-up')
    const up = await client.post('/sign-up', { email: 'land@example.com', password: PASSWORD, account_name: 'Land Co' })
    expect(up.statusCode).toBe(303)
    const accountId = /^\/app\/(acct_\w+)\/contacts$/.exec(String(up.headers.location))?.[1]
    expect(accountId).toBeDefined()

    const { client: again, res } = await signIn('land@example.com')
    expect(res.statusCode).toBe(303)
    const app = await again.get(String(res.headers.location))
    expect(app.statusCode).toBe(303)
    expect(app.headers.location).toBe(up.headers.location)
    const page = await again.get(String(app.headers.location))
    expect(page.statusCode).toBe(200)
    expect(page.body).toContain('<h1>Contacts</h1>')
    // The brand is not a second "Contacts": inside an account the header leads with its name.
    expect(page.body.match(/>Contacts<\/a>/g)).toHaveLength(1)
    expect(page.body).toContain('<strong>Land Co</strong></summary>')
  })

  it('an invitation shows the invited email, and signing up or in from it returns to it', async () => {
    const owner = await signUp(t.app, 'next-owner@example.com', 'Next Co')
    const path = await invitationPath(owner.client, owner.accountId, 'next-newcomer@example.com')

    const visitor = webClient(t.app)
    const invitation = await visitor.get(path)
    expect(invitation.statusCode).toBe(200)
    expect(invitation.body).toContain('The invitation is for <strong>next-newcomer@example.com</strong>')
    const email = encodeURIComponent('next-newcomer@example.com')
    const next = encodeURIComponent(path)
    expect(carriedNext(invitation.body).links).toEqual([
      `/sign-in?next=${next}&email=${email}`,
      `/sign-up?next=${next}&email=${email}`,
    ])

    // Sign up from it: the email is filled in, the form carries where to return, and returns there.
    const signUpPage = await visitor.get(`/sign-up?next=${next}&email=${email}`)
    expect(signUpPage.body).toContain('value="next-newcomer@example.com"')
    expect(signUpPage.body).toContain('Then you return to your invitation.')
    expect(carriedNext(signUpPage.body).input).toBe(path)
    expect(carriedNext(signUpPage.body).links).toEqual([`/sign-in?next=${next}`])
    const up = await visitor.post('/sign-up', {
      email: 'next-newcomer@example.com',
      password: PASSWORD,
      account_name: 'Newcomer Co',
      next: path,
    })
    expect(up.statusCode).toBe(303)
    expect(up.headers.location).toBe(path)
    expect((await visitor.get(path)).body).toContain('Accept invitation')
    expect((await visitor.post(`${path}/accept`, {})).headers.location).toBe(`/app/${owner.accountId}/contacts`)

    // Sign in from another invitation: back to it too.
    const second = await invitationPath(owner.client, owner.accountId, 'next-member@example.com')
    await signUp(t.app, 'next-member@example.com', 'Member Co')
    const { res } = await signIn('next-member@example.com', { next: second })
    expect(res.statusCode).toBe(303)
    expect(res.headers.location).toBe(second)
    // A wrong password keeps `next` in the form it shows again.
    const { res: wrong } = await signIn('next-member@example.com', { next: second, password: 'wrong-password!' })
    expect(wrong.statusCode).toBe(401)
    expect(carriedNext(wrong.body).input).toBe(second)
  })

  it('`next` is only a path of this app: another site, a protocol-relative or a backslash URL is ignored', async () => {
    await signUp(t.app, 'redirect@example.com')
    const evil = [
      'https://evil.example/app',
      '//evil.example/app',
      '/\\evil.example/app',
      '\\\\evil.example/app',
      '/\t/evil.example/app',
      'javascript:alert(1)//app',
      'http:/app',
      '/sign-out',
      '/app/../sign-out',
      ' /app',
    ]
    for (const next of evil) {
      const { res } = await signIn('redirect@example.com', { next })
      expect(res.statusCode, next).toBe(303)
      expect(res.headers.location, next).toBe('/app')
      const page = await webClient(t.app).get(`/sign-in?next=${encodeURIComponent(next)}`)
      expect(carriedNext(page.body).input, next).toBeUndefined()
    }
    const up = webClient(t.app)
    await up.get('/sign-up')
    const res = await up.post('/sign-up', {
      email: 'redirect-up@example.com',
      password: PASSWORD,
      account_name: 'Up Co',
      next: '//evil.example/app',
    })
    expect(res.headers.location).toMatch(/^\/app\/acct_\w+\/contacts$/)
    // A page of the app, with its query, is kept.
    const { res: ok } = await signIn('redirect@example.com', { next: '/app/sessions?x=1' })
    expect(ok.headers.location).toBe('/app/sessions?x=1')
  })

  it('the keys page: a use shows at once, a key without expiry says Never, each row has Roll… and Revoke… links', async () => {
    const { client, accountId } = await signUp(t.app, 'usage@example.com')
    await client.get(`/app/${accountId}/settings/api`)
    const created = await client.post(`/app/${accountId}/settings/api/keys`, {
      name: 'Production',
      scope: 'full',
      expires: 'never',
    })
    const key = shownKey((await client.get(String(created.headers.location))).body) as string
    const keyId = /keys\/(key_\w+)\/created/.exec(String(created.headers.location))?.[1] as string
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${key}` } })
    expect(me.statusCode).toBe(200)

    // No wait for the 5 s flush: the page shows the request it was just sent.
    const page = (await client.get(`/app/${accountId}/settings/api`)).body
    const row = new RegExp(`<tr data-key-id="${keyId}">(.*?)</tr>`, 's').exec(page)?.[1] ?? ''
    expect(row).toContain('<td data-label="Last used"><time datetime="')
    expect(row).toContain('Within the last minute</time>')
    expect(row).toContain('<td data-label="Expires">Never</td>')
    expect(row).toContain('aria-label="1 request in the last 14 days"')
    expect(row).not.toContain('<select')
    expect(row).not.toContain('<form')
    expect(row).toContain(`href="/app/${accountId}/settings/api/keys/${keyId}/roll">Roll…`)
    expect(row).toContain(`href="/app/${accountId}/settings/api/keys/${keyId}/revoke">Revoke…`)

    // Roll… asks how long the old key keeps working; "now" is confirmed once more.
    const roll = await client.get(`/app/${accountId}/settings/api/keys/${keyId}/roll`)
    expect(roll.statusCode).toBe(200)
    expect(roll.body).toContain('<label for="f-overlap">Old key expires</label>')
    expect(roll.body).toContain('<option value="24h" selected>In 24 hours</option>')
    const now = await client.post(`/app/${accountId}/settings/api/keys/${keyId}/roll`, { overlap: 'now' })
    expect(now.statusCode).toBe(200)
    expect(now.body).toContain('now?</h1>')
    const keys = await t.db.selectFrom('api_keys').select('id').where('account_id', '=', accountId).execute()
    expect(keys).toHaveLength(1)
    expect(
      (await client.get(`/app/${accountId}/settings/api/keys/key_00000000000000000000000000/roll`)).statusCode,
    ).toBe(404)
  })

  it('Settings: a member’s tabs have no Members; the sessions page keeps the header and the tabs', async () => {
    const owner = await signUp(t.app, 'tabs-owner@example.com', 'Tabs Co')
    const member = await signUp(t.app, 'tabs-member@example.com', 'Own Co')
    expect((await inviteAndAccept(owner, member.client, 'tabs-member@example.com')).statusCode).toBe(303)
    const page = (await member.client.get(`/app/${owner.accountId}/settings/sessions`)).body
    const tabs = /<nav class="tabs" aria-label="Settings">(.*?)<\/nav>/s.exec(page)?.[1] ?? ''
    expect(tabs).toContain('API &amp; Webhooks')
    expect(tabs).not.toContain('Members')
    expect(tabs).toContain('aria-current="page">Your sessions</a>')
    expect(page).toContain(`<a href="/app/${owner.accountId}/settings" aria-current="page">Settings</a>`)
  })
})
