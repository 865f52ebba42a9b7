import { Writable } from 'node:stream'
import { parse } from 'csv-parse/sync'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { multipart, signUp as signUpClient } from '../../test/web-client.js'
import { liveTenant } from '../accounts/tenant.js'
import { buildApp } from '../app.js'
import { CSV_COLUMNS, exportContactsCsv, readExportPage } from '../contacts/contacts.csv-export.js'
import { parseStoredContact } from '../contacts/contacts.js'
import { listBounds } from '../contacts/contacts.list-query.js'
import type { Contact, ContactInput } from '../contacts/contacts.schemas.js'
import { findStoredBody } from '../db/stored-body.js'

interface Session {
  email: string
  accountId: string
  cookie: string
  csrf: string
}

const unescapeAmp = (href: string) => href.replaceAll('&amp;', '&')
const rowCount = (body: string) => (body.match(/data-contact-id=/g) ?? []).length
const nextHref = (body: string) => {
  const match = /href="([^"]+)" rel="next">Next page</.exec(body)
  return match?.[1] ? unescapeAmp(match[1]) : undefined
}

const urlencoded = (fields: Record<string, string>) => ({
  payload: new URLSearchParams(fields).toString(),
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
})

let users = 0

describe.each(testDialects())('contacts pages on %s', (dialect) => {
  let t: TestHarness
  let ada: Session
  let bob: Session

  async function signUp(name: string): Promise<Session> {
    const email = `${name}-${++users}@example.com`
    const { client, accountId } = await signUpClient(t.app, email, name)
    const page = await client.get(`/app/${accountId}/contacts`)
    expect(page.statusCode).toBe(200)
    return { email, accountId, cookie: client.cookies.get('sid') ?? '', csrf: client.csrf() }
  }

  const get = (s: Session, path: string) =>
    t.app.inject({ method: 'GET', url: `/app/${s.accountId}${path}`, cookies: { sid: s.cookie } })
  const post = (s: Session, path: string, fields: Record<string, string>, csrf: string | null = s.csrf) =>
    t.app.inject({
      method: 'POST',
      url: `/app/${s.accountId}${path}`,
      cookies: { sid: s.cookie },
      ...urlencoded(csrf === null ? fields : { _csrf: csrf, ...fields }),
    })
  const seed = (s: Session, input: ContactInput) => t.deps.contacts.create(liveTenant(s.accountId), input)
  const stored = async (s: Session, id: string) => {
    const body = await findStoredBody(t.db, 'contacts', s.accountId, id)
    return body === undefined ? undefined : parseStoredContact(body)
  }
  /** Everything an account has stored, to prove a refused request changed nothing. */
  const snapshot = async (s: Session) => ({
    contacts: await t.db
      .selectFrom('contacts')
      .select(['id', 'body'])
      .where('account_id', '=', s.accountId)
      .orderBy('id')
      .execute(),
    tags: await t.db
      .selectFrom('contact_tags')
      .select(['tag', 'contact_id'])
      .where('account_id', '=', s.accountId)
      .orderBy('contact_id')
      .orderBy('tag')
      .execute(),
    events: (await t.db.selectFrom('events').select('id').where('account_id', '=', s.accountId).execute()).length,
  })
  const eventTypes = async (s: Session) =>
    (await t.db.selectFrom('events').select('type').where('account_id', '=', s.accountId).orderBy('id').execute()).map(
      (e) => e.type,
    )

  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    ada = await signUp('ada')
    bob = await signUp('bob')
  })
  afterAll(() => t.close())

  describe('list, search and paging', () => {
    let s: Session
    beforeAll(async () => {
      s = await signUp('paging')
      for (let i = 0; i < 60; i++) {
        await seed(s, {
          first_name: `Person${String(i).padStart(2, '0')}`,
          email: `p${i}@example.com`,
          company: i % 2 === 0 ? 'Even Co' : 'Odd Co',
          tags: i % 3 === 0 ? ['vip'] : [],
        })
      }
    })

    it('shows 50 contacts with the columns and a Next page link, then the remaining 10', async () => {
      const first = await get(s, '/contacts')
      expect(first.statusCode).toBe(200)
      expect(first.headers['content-type']).toBe('text/html; charset=utf-8')
      for (const heading of ['Name', 'Email', 'Phone', 'Company', 'Tags', 'Updated']) {
        expect(first.body).toContain(`>${heading}</th>`)
      }
      expect(first.body).toContain('>New contact</a>')
      expect(first.body).toContain('>Export CSV</a>')
      expect(first.body).toContain('>Import CSV</a>')
      expect(first.body).toContain('<label for="f-q">Search</label>')
      expect(first.body).toContain('<label for="f-tag">Tag</label>')
      expect(rowCount(first.body)).toBe(50)
      expect(first.body).toContain('Person00')
      expect(first.body).not.toContain('Person50')
      const next = nextHref(first.body)
      expect(next).toMatch(new RegExp(`^/app/${s.accountId}/contacts\\?after=`))

      const second = await t.app.inject({ method: 'GET', url: next as string, cookies: { sid: s.cookie } })
      expect(second.statusCode).toBe(200)
      expect(rowCount(second.body)).toBe(10)
      expect(second.body).toContain('Person59')
      expect(second.body).not.toContain('Person49')
      expect(nextHref(second.body)).toBeUndefined()
      expect(second.body).toContain('>First page</a>')
    })

    it('uses the API cursor: a web Next page link continues the same list in the API', async () => {
      const first = await get(s, '/contacts?q=person')
      const after = new URL(nextHref(first.body) as string, 'http://x').searchParams.get('after') as string
      const key = await t.createKey({ id: s.accountId } as TestAccount)
      const api = await t.app.inject({
        method: 'GET',
        url: `/api/v1/contacts?q=person&after=${encodeURIComponent(after)}`,
        headers: { authorization: `Bearer ${key}` },
      })
      expect(api.statusCode, api.body).toBe(200)
      expect(api.json().contacts.map((c: Contact) => c.first_name)[0]).toBe('Person50')
    })

    it('searches by prefix and filters by tag, keeping both in the Next page link', async () => {
      const search = await get(s, '/contacts?q=person0')
      expect(rowCount(search.body)).toBe(10)
      expect(search.body).toContain('value="person0"')

      const vip = await get(s, '/contacts?tag=vip')
      expect(rowCount(vip.body)).toBe(20)
      expect(vip.body).not.toContain('Person01')

      const both = await get(s, '/contacts?q=even&tag=vip')
      expect(rowCount(both.body)).toBe(10) // multiples of 6

      const all = await get(s, '/contacts?q=person&tag=')
      const next = nextHref(all.body) as string
      expect(next).toContain('q=person')
      expect(next).not.toContain('tag=')
      const rest = await t.app.inject({ method: 'GET', url: next, cookies: { sid: s.cookie } })
      expect(rowCount(rest.body)).toBe(10)

      const none = await get(s, '/contacts?q=nobody')
      expect(rowCount(none.body)).toBe(0)
      expect(none.body).toContain('No contacts match')
    })

    it('a search cut short by its scan bound: an empty page that says so, links on, and every match once', async () => {
      const bounds = { ...listBounds }
      // The bounds lowered (the real ones are 500 and 1,000): the walk, 20 contacts a page.
      Object.assign(listBounds, { indexedMax: 0, scanMax: 20 })
      try {
        const first = await get(s, '/contacts?q=person5')
        expect(first.statusCode).toBe(200)
        expect(rowCount(first.body)).toBe(0)
        expect(first.body).toContain('the search continues on the next page')
        const names: string[] = []
        let next = nextHref(first.body)
        let pages = 1
        while (next !== undefined) {
          const page = await t.app.inject({ method: 'GET', url: next, cookies: { sid: s.cookie } })
          expect(page.statusCode).toBe(200)
          names.push(...[...page.body.matchAll(/>(Person\d\d)</g)].map((m) => m[1] as string))
          next = nextHref(page.body)
          pages++
        }
        // 0-19, 20-39, 40-59 (the ten), then past the end: empty, no link.
        expect(pages).toBe(4)
        expect(names).toEqual(Array.from({ length: 10 }, (_, i) => `Person5${i}`))
      } finally {
        Object.assign(listBounds, bounds)
      }
    })

    it('answers 400 with a clear message for a bad cursor or filter', async () => {
      const tampered = await get(s, '/contacts?after=not-a-cursor')
      expect(tampered.statusCode).toBe(400)
      expect(tampered.body).toContain('Start again from the first page')

      const first = await get(s, '/contacts?q=person')
      const after = new URL(nextHref(first.body) as string, 'http://x').searchParams.get('after') as string
      const otherSearch = await get(s, `/contacts?q=p&after=${encodeURIComponent(after)}`)
      expect(otherSearch.statusCode).toBe(400)
      expect(otherSearch.body).toContain('not valid for this search')

      const longTag = await get(s, `/contacts?tag=${'t'.repeat(65)}`)
      expect(longTag.statusCode).toBe(400)
      expect(longTag.body).toContain('The tag is too long: shorten it to at most 64 characters.')

      const longQ = await get(s, `/contacts?q=${'q'.repeat(257)}`)
      expect(longQ.statusCode).toBe(400)
      expect(longQ.body).toContain('The search is too long: shorten it to at most 256 characters.')

      const twice = await get(s, '/contacts?q=a&q=b')
      expect(twice.statusCode).toBe(400)
      expect(twice.body).toContain('use it once')
    })
  })

  describe('create', () => {
    it('shows a labelled form with a CSRF token', async () => {
      const res = await get(ada, '/contacts/new')
      expect(res.statusCode).toBe(200)
      expect(res.body).toContain(`<form method="post" action="/app/${ada.accountId}/contacts"`)
      expect(res.body).toContain(`name="_csrf" value="${ada.csrf}"`)
      for (const name of ['email', 'first_name', 'last_name', 'phone', 'company', 'job_title', 'tags']) {
        expect(res.body).toContain(`<label for="f-${name}">`)
        expect(res.body).toContain(`id="f-${name}" name="${name}"`)
      }
    })

    it('creates a contact and redirects to the list with a notice', async () => {
      const res = await post(ada, '/contacts', {
        email: ' grace@example.com ',
        first_name: 'Grace',
        last_name: 'Hopper',
        phone: '+1 202 555 0143',
        company: '',
        job_title: 'Rear Admiral',
        tags: 'navy, cobol, , navy',
      })
      expect(res.statusCode, res.body).toBe(303)
      expect(res.headers.location).toBe(`/app/${ada.accountId}/contacts?notice=created`)
      const list = await t.app.inject({
        method: 'GET',
        url: res.headers.location as string,
        cookies: { sid: ada.cookie },
      })
      expect(list.body).toContain('The contact was created.')
      expect(list.body).toContain('Grace Hopper')
      const id = /data-contact-id="([^"]+)"/.exec(list.body)?.[1] as string
      expect(await stored(ada, id)).toMatchObject({
        email: 'grace@example.com',
        first_name: 'Grace',
        phone: '+12025550143',
        company: null,
        job_title: 'Rear Admiral',
        tags: ['navy', 'cobol'],
        custom_fields: {},
      })
      expect(await eventTypes(ada)).toContain('contact.created')
    })

    it.each([
      [
        'no identifying field',
        { company: 'Nobody Inc' },
        'email',
        'Enter at least one of email, phone, first name or last name.',
      ],
      ['an invalid email', { email: 'not-an-email' }, 'email', 'Enter a valid email address, like ada@example.com.'],
      [
        'an invalid phone',
        { first_name: 'X', phone: '12' },
        'phone',
        'Enter the number in international format without an extension, like +44 1632 960961.',
      ],
      ['a long name', { first_name: 'n'.repeat(257) }, 'first_name', 'Shorten it to at most 256 characters.'],
      ['a long company', { last_name: 'Y', company: 'c'.repeat(257) }, 'company', 'Shorten it to at most 256'],
      ['a long tag', { last_name: 'Y', tags: 't'.repeat(65) }, 'tags', 'Shorten each tag to at most 64 characters.'],
      [
        'too many tags',
        { last_name: 'Y', tags: Array.from({ length: 51 }, (_, i) => `t${i}`).join(',') },
        'tags',
        'Use at most 50 tags.',
      ],
    ])(
      'refuses %s: 400, the message under the field, the values kept, nothing saved',
      async (_, fields, name, message) => {
        const before = await snapshot(ada)
        const res = await post(ada, '/contacts', fields)
        expect(res.statusCode).toBe(400)
        expect(res.body).toContain(`<p class="error" id="f-${name}-error">${message}`)
        expect(res.body).toContain(`aria-describedby="f-${name}-error"`)
        expect(res.body).toContain('The contact was not saved.')
        const [field, value] = Object.entries(fields)[0] as [string, string]
        expect(res.body).toContain(`name="${field}" type=`)
        expect(res.body).toContain(`value="${value}"`)
        expect(await snapshot(ada)).toEqual(before)
      },
    )

    it('refuses a duplicate email with 409 and a link to the contact that has it', async () => {
      const { contact } = await seed(ada, { email: 'dup@example.com' })
      const before = await snapshot(ada)
      const res = await post(ada, '/contacts', { email: 'DUP@example.com', first_name: 'Again' })
      expect(res.statusCode).toBe(409)
      expect(res.body).toContain('Another contact already has this email.')
      expect(res.body).toContain(`href="/app/${ada.accountId}/contacts/${contact.id}"`)
      expect(res.body).toContain('Use a different email, or edit the contact that has it.')
      expect(await snapshot(ada)).toEqual(before)
    })
    // app.inject does not show it: a handler that redirects after its form page was sent changes
    // the status a real socket reports at its end (the log line, the metrics) and logs a warning.
    it('a refused form is answered, logged and counted with its status, never redirected after', async () => {
      const { contact } = await seed(ada, { email: 'counted@example.com' })
      const lines: { msg?: string; status?: number; url?: string }[] = []
      const logStream = new Writable({
        write(chunk, _encoding, done) {
          lines.push(
            ...String(chunk)
              .trim()
              .split('\n')
              .map((line) => JSON.parse(line)),
          )
          done()
        },
      })
      const logged = await buildApp({ ...t.deps, config: { ...t.deps.config, logLevel: 'info' } }, { logStream })
      try {
        const origin = await logged.listen({ host: '127.0.0.1', port: 0 })
        const counts = async () => {
          const { values } = await t.deps.metrics.httpRequests.get()
          const count = (route: string, status: string) =>
            values.find(
              (v) =>
                v.labels.method === 'POST' &&
                v.labels.route === `/app/:accountId${route}` &&
                v.labels.status === status,
            )?.value ?? 0
          return ['/contacts', '/contacts/:id'].flatMap((route) => ['303', '400', '409'].map((s) => count(route, s)))
        }
        const before = await counts()
        const send = (path: string, fields: Record<string, string>) =>
          fetch(`${origin}/app/${ada.accountId}${path}`, {
            method: 'POST',
            redirect: 'manual',
            headers: { cookie: `sid=${ada.cookie}`, ...urlencoded({}).headers },
            body: new URLSearchParams({ _csrf: ada.csrf, ...fields }),
          })
        expect((await send('/contacts', { email: 'not-an-email' })).status).toBe(400)
        expect((await send('/contacts', { email: 'counted@example.com' })).status).toBe(409)
        expect((await send(`/contacts/${contact.id}`, { email: '' })).status).toBe(400)
        const after = await counts()
        // [/contacts 303, 400, 409, /contacts/:id 303, 400, 409]
        expect(after.map((n, i) => n - (before[i] ?? 0))).toEqual([0, 1, 1, 0, 1, 0])
        const requests = lines.filter((line) => line.msg === 'request' && line.url?.includes('/contacts'))
        expect(requests.map((line) => line.status)).toEqual([400, 409, 400])
        expect(lines.filter((line) => /already sent/i.test(line.msg ?? ''))).toEqual([])
      } finally {
        await logged.close()
      }
    })

    it('answers a JSON field that is not text on the form page, and refuses a multipart body', async () => {
      const { contact } = await seed(ada, { email: 'typed@example.com', first_name: 'Typed' })
      const before = await snapshot(ada)
      for (const path of ['/contacts', `/contacts/${contact.id}`]) {
        const json = await t.app.inject({
          method: 'POST',
          url: `/app/${ada.accountId}${path}`,
          cookies: { sid: ada.cookie },
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ _csrf: ada.csrf, email: 5, first_name: ['A'], company: 'Typed Co' }),
        })
        expect(json.statusCode, path).toBe(400)
        expect(json.body).toContain('Enter at least one of email, phone, first name or last name.')
        expect(json.body).toContain('value="Typed Co"')
        const multi = await t.app.inject({
          method: 'POST',
          url: `/app/${ada.accountId}${path}`,
          cookies: { sid: ada.cookie },
          ...multipart([
            { name: '_csrf', value: ada.csrf },
            { name: 'email', value: 'multi@example.com' },
          ]),
        })
        // A multipart post goes only to a route that takes a file (the import): refused first.
        expect(multi.statusCode, path).toBe(403)
        expect(multi.body).toContain('Form expired')
      }
      expect(await snapshot(ada)).toEqual(before)
    })
  })

  describe('edit and delete', () => {
    it('shows the contact with its custom fields read-only, and saves changes (empty fields cleared)', async () => {
      const { contact } = await seed(ada, {
        email: 'edit@example.com',
        first_name: 'Edith',
        company: 'Before Ltd',
        tags: ['a', 'b'],
        custom_fields: { plan: 'pro', seats: 12 },
      })
      const page = await get(ada, `/contacts/${contact.id}`)
      expect(page.statusCode).toBe(200)
      expect(page.body).toContain('value="Edith"')
      expect(page.body).toContain('value="a, b"')
      expect(page.body).toContain('<td class="mono">plan</td><td class="mono">&quot;pro&quot;</td>')
      expect(page.body).toContain('<td class="mono">seats</td><td class="mono">12</td>')
      expect(page.body).not.toContain('name="custom_fields"')
      expect(page.body).toContain(`href="/app/${ada.accountId}/contacts/${contact.id}/delete"`)

      const res = await post(ada, `/contacts/${contact.id}`, {
        email: 'edit@example.com',
        first_name: 'Edith',
        last_name: 'Clarke',
        phone: '',
        company: '',
        job_title: '',
        tags: 'b',
      })
      expect(res.statusCode, res.body).toBe(303)
      expect(res.headers.location).toBe(`/app/${ada.accountId}/contacts?notice=updated`)
      expect(await stored(ada, contact.id)).toMatchObject({
        first_name: 'Edith',
        last_name: 'Clarke',
        company: null,
        tags: ['b'],
        custom_fields: { plan: 'pro', seats: 12 },
      })
      expect((await eventTypes(ada)).at(-1)).toBe('contact.updated')
    })

    it('re-renders the edit form with what to fix, and 409 on another contact’s email', async () => {
      const { contact } = await seed(ada, { email: 'keep@example.com', first_name: 'Keep' })
      await seed(ada, { email: 'taken@example.com' })
      const before = await snapshot(ada)
      const cleared = await post(ada, `/contacts/${contact.id}`, { email: '', first_name: '', company: 'Only Co' })
      expect(cleared.statusCode).toBe(400)
      expect(cleared.body).toContain('Enter at least one of email, phone, first name or last name.')
      expect(cleared.body).toContain('value="Only Co"')
      const taken = await post(ada, `/contacts/${contact.id}`, { email: 'taken@example.com', first_name: 'Keep' })
      expect(taken.statusCode).toBe(409)
      expect(await snapshot(ada)).toEqual(before)
    })

    it('deletes after a confirmation page', async () => {
      const { contact } = await seed(ada, { email: 'bye@example.com', first_name: 'Bye' })
      const confirm = await get(ada, `/contacts/${contact.id}/delete`)
      expect(confirm.statusCode).toBe(200)
      expect(confirm.body).toContain('Delete “Bye”?')
      expect(confirm.body).toContain(
        `<form method="post" action="/app/${ada.accountId}/contacts/${contact.id}/delete">`,
      )
      expect(confirm.body).toContain('>Delete contact</button>')
      expect(await stored(ada, contact.id)).toBeDefined()

      const res = await post(ada, `/contacts/${contact.id}/delete`, {})
      expect(res.statusCode).toBe(303)
      expect(res.headers.location).toBe(`/app/${ada.accountId}/contacts?notice=deleted`)
      expect((await get(ada, '/contacts?notice=deleted')).body).toContain('The contact was deleted.')
      // A prototype name is no notice (a plain object lookup showed the function's source).
      const odd = await get(ada, '/contacts?notice=constructor')
      expect(odd.statusCode).toBe(200)
      expect(odd.body).not.toMatch(/native code|role="status"/)
      expect(await stored(ada, contact.id)).toBeUndefined()
      expect((await eventTypes(ada)).at(-1)).toBe('contact.deleted')

      expect((await post(ada, `/contacts/${contact.id}/delete`, {})).statusCode).toBe(404)
      expect((await get(ada, `/contacts/${contact.id}`)).statusCode).toBe(404)
    })
  })

  describe('safety', () => {
    it('refuses every form post without a valid CSRF token: 403 and nothing changes', async () => {
      const { contact } = await seed(ada, { email: 'csrf@example.com', first_name: 'Safe' })
      const before = await snapshot(ada)
      const attempts = [
        await post(ada, '/contacts', { first_name: 'Forged' }, null),
        await post(ada, '/contacts', { first_name: 'Forged' }, 'wrong'),
        await post(ada, '/contacts', { first_name: 'Forged' }, bob.csrf),
        await post(ada, `/contacts/${contact.id}`, { first_name: 'Forged' }, null),
        await post(ada, `/contacts/${contact.id}/delete`, {}, null),
        await post(ada, '/contacts/import', {}, null),
      ]
      for (const res of attempts) {
        expect(res.statusCode).toBe(403)
        expect(res.body).toContain('Reload the page and submit the form again.')
      }
      expect(await snapshot(ada)).toEqual(before)
    })

    it('shows another account’s pages and contacts as 404', async () => {
      const { contact } = await seed(ada, { email: 'private@example.com', first_name: 'Private' })
      const before = await snapshot(ada)
      // Bob in Ada's account.
      for (const path of ['/contacts', `/contacts/${contact.id}`, '/contacts/new', '/contacts/export.csv']) {
        const res = await t.app.inject({
          method: 'GET',
          url: `/app/${ada.accountId}${path}`,
          cookies: { sid: bob.cookie },
        })
        expect(res.statusCode, path).toBe(404)
        expect(res.body).not.toContain('Private')
      }
      // Ada's contact id in Bob's own account.
      expect((await get(bob, `/contacts/${contact.id}`)).statusCode).toBe(404)
      expect((await get(bob, `/contacts/${contact.id}/delete`)).statusCode).toBe(404)
      expect((await post(bob, `/contacts/${contact.id}`, { first_name: 'Stolen' })).statusCode).toBe(404)
      expect((await post(bob, `/contacts/${contact.id}/delete`, {})).statusCode).toBe(404)
      expect((await get(bob, '/contacts/con_00000000000000000000000000')).statusCode).toBe(404)
      expect(await snapshot(ada)).toEqual(before)
    })

    it('escapes contact text and the search everywhere', async () => {
      const s = await signUp('xss')
      const { contact } = await seed(s, {
        first_name: '<script>alert(1)</script>',
        company: '"><img src=x onerror=alert(2)>',
        tags: ['<b>'],
      })
      for (const path of ['/contacts', `/contacts/${contact.id}`, `/contacts/${contact.id}/delete`]) {
        const res = await get(s, path)
        expect(res.statusCode).toBe(200)
        expect(res.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
        expect(res.body).not.toContain('<script>alert(1)')
        expect(res.body).not.toContain('<img src=x')
        expect(res.body).not.toContain('<b>')
      }
      const search = await get(s, `/contacts?q=${encodeURIComponent('"><script>alert(3)</script>')}`)
      expect(search.body).toContain('value="&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"')
      expect(search.body).not.toContain('<script>alert(3)')
      expect(search.headers['content-security-policy']).toContain("script-src 'self'")
    })
  })

  describe('CSV export (the import: contacts-import.routes.test.ts)', () => {
    let s: Session
    beforeAll(async () => {
      s = await signUp('csv')
    })

    const exportCsv = async () => {
      const res = await get(s, '/contacts/export.csv')
      expect(res.statusCode).toBe(200)
      return res
    }

    it('exports every contact with a header, a download name and the formula guard', async () => {
      await seed(s, {
        email: 'ada@example.com',
        first_name: 'Ada',
        last_name: 'Lovelace',
        phone: '+44 1632 960961',
        company: '=HYPERLINK("http://evil.example","click")',
        job_title: 'Line one\nline two, "quoted"',
        tags: ['vip', '@home'],
        custom_fields: { plan: 'pro', seats: 12, beta: true },
      })
      await seed(s, { email: 'bob@example.com', first_name: '-1+2', last_name: "'=already" })
      const res = await exportCsv()
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8')
      expect(res.headers['content-disposition']).toBe('attachment; filename="contacts.csv"')
      const [header, ...rows] = parse(res.body) as string[][]
      expect(header).toEqual([...CSV_COLUMNS])
      expect(rows).toHaveLength(2)
      const [adaRow, bobRow] = rows.map((row) => Object.fromEntries(CSV_COLUMNS.map((c, i) => [c, row[i]])))
      expect(adaRow).toMatchObject({
        email: 'ada@example.com',
        first_name: 'Ada',
        phone: "'+441632960961",
        company: `'=HYPERLINK("http://evil.example","click")`,
        job_title: 'Line one\nline two, "quoted"',
        tags: 'vip;@home',
        custom_fields: '{"plan":"pro","seats":12,"beta":true}',
      })
      expect(adaRow?.id).toMatch(/^con_/)
      expect(adaRow?.created_at).toMatch(/^\d{4}-/)
      expect(bobRow).toMatchObject({ first_name: "'-1+2", last_name: "''=already" })
    })

    it('yields to the event loop between export pages (SQLite reads a page synchronously)', async () => {
      for (let i = 0; i < 6; i++) {
        await seed(s, { email: `yield${i}@example.com` })
      }
      // Counts the event loop's turns while the export is read: without a yield between pages the
      // whole export ran in microtasks, and no other request was served until it ended.
      let turns = 0
      let reading = true
      const turn = () => {
        if (reading) {
          turns++
          setImmediate(turn)
        }
      }
      setImmediate(turn)
      let pages = 0
      for await (const _ of exportContactsCsv((after) => readExportPage(t.db, s.accountId, after, 1))) {
        pages++
      }
      reading = false
      expect(pages).toBeGreaterThanOrEqual(7)
      expect(turns).toBeGreaterThanOrEqual(pages - 2)
    })

    it('streams the export page by page in creation order', async () => {
      const res = await exportCsv()
      let small = ''
      for await (const chunk of exportContactsCsv((after) => readExportPage(t.db, s.accountId, after, 1))) {
        small += chunk
      }
      expect(small).toBe(res.body)
    })
  })
})
