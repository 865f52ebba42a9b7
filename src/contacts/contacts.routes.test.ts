import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem, snapshotAccount } from '../../test/helpers.js'

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

describe.each(testDialects())('contacts API on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const ada = {
    email: '  Ada@Example.com ',
    first_name: 'Ada',
    last_name: 'Lovelace',
    phone: '+44 1632 960961',
    company: 'Analytical Engines',
    tags: ['vip', 'vip', 'math'],
    custom_fields: { plan: 'pro', seats: 12, beta: true },
  }

  describe('POST /contacts', () => {
    it('creates a contact: 201, Location, normalized fields, event recorded', async () => {
      const acme = await t.createAccount()
      const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: ada })
      expect(res.statusCode).toBe(201)
      const contact = res.json()
      expect(contact).toEqual({
        object: 'contact',
        id: expect.stringMatching(/^con_[0-9A-Z]{26}$/),
        email: 'Ada@Example.com',
        first_name: 'Ada',
        last_name: 'Lovelace',
        phone: '+441632960961',
        company: 'Analytical Engines',
        job_title: null,
        tags: ['vip', 'math'],
        custom_fields: { plan: 'pro', seats: 12, beta: true },
        created_at: expect.stringMatching(TIMESTAMP),
        updated_at: contact.created_at,
        livemode: true,
      })
      expect(res.headers.location).toBe(`http://api.test/api/v1/contacts/${contact.id}`)
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')

      const get = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${contact.id}` })
      expect(get.statusCode).toBe(200)
      expect(get.json()).toEqual(contact)

      const events = (await t.inject(acme, { method: 'GET', url: '/api/v1/events' })).json()
      expect(events.events).toHaveLength(1)
      expect(events.events[0]).toMatchObject({ object: 'event', type: 'contact.created', data: { object: contact } })
    })

    it('accepts a contact with only a name or only a phone', async () => {
      const acme = await t.createAccount()
      expect((await createContact(t, acme, { last_name: 'Hopper' })).last_name).toBe('Hopper')
      expect((await createContact(t, acme, { phone: '+1 202 555 0143' })).phone).toBe('+12025550143')
    })

    it('refuses a second contact with the same email, case-insensitively: 409 with the existing id', async () => {
      const acme = await t.createAccount()
      const first = await createContact(t, acme, { email: 'grace@example.com' })
      const before = await snapshotAccount(t, acme)
      const res = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: ' GRACE@example.COM' },
      })
      const body = expectProblem(res, 409, 'contact_exists')
      expect(body.existing_id).toBe(first.id)
      expect(await snapshotAccount(t, acme)).toEqual(before)
    })

    it('lets two accounts use the same email', async () => {
      const [a, b] = [await t.createAccount('A'), await t.createAccount('B')]
      await createContact(t, a, { email: 'shared@example.com' })
      await createContact(t, b, { email: 'shared@example.com' })
    })

    it('needs at least one of email, phone, first_name, last_name', async () => {
      const acme = await t.createAccount()
      const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { company: 'Solo Ltd' } })
      expectProblem(res, 400, 'invalid_parameter')
    })
    it('an email that is not an address is one 400 error on email (create, patch, upsert), and nothing is stored', async () => {
      const acme = await t.createAccount()
      const created = (
        await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { first_name: 'A' } })
      ).json()
      const attempts = [
        { method: 'POST' as const, url: '/api/v1/contacts', payload: { email: 'ada@', first_name: 'Ada' } },
        { method: 'PATCH' as const, url: `/api/v1/contacts/${created.id}`, payload: { email: 'ada at example.com' } },
        { method: 'POST' as const, url: '/api/v1/contacts/upsert', payload: { email: 'a@b' } },
      ]
      for (const attempt of attempts) {
        const res = await t.inject(acme, attempt)
        expectProblem(res, 400, 'invalid_parameter')
        expect(res.json().errors).toEqual([{ field: 'email', message: 'must be an email address' }])
      }
      const list = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).json()
      expect(list.contacts).toEqual([created])
    })
  })

  describe('PATCH /contacts/{id}', () => {
    it('merges: absent unchanged, null clears, custom_fields per key, null deletes a key, tags replaced', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, ada)
      const res = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${created.id}`,
        payload: {
          company: null,
          job_title: 'Countess',
          tags: ['alumni'],
          custom_fields: { seats: 20, beta: null, tier: 'gold' },
        },
      })
      expect(res.statusCode).toBe(200)
      const updated = res.json()
      expect(updated).toEqual({
        ...created,
        company: null,
        job_title: 'Countess',
        tags: ['alumni'],
        custom_fields: { plan: 'pro', seats: 20, tier: 'gold' },
        updated_at: expect.stringMatching(TIMESTAMP),
      })
      expect(updated.updated_at >= created.updated_at).toBe(true)
      expect((await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${created.id}` })).json()).toEqual(updated)

      const byOldTag = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?tag=vip' })
      expect(byOldTag.json().contacts).toEqual([])
      const byNewTag = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts?tag=alumni' })
      expect(byNewTag.json().contacts.map((c: { id: string }) => c.id)).toEqual([created.id])

      const types = (await t.inject(acme, { method: 'GET', url: '/api/v1/events' }))
        .json()
        .events.map((e: { type: string }) => e.type)
      expect(types).toEqual(['contact.created', 'contact.updated'])
    })

    it('an empty patch changes nothing and records no event', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, { email: 'same@example.com' })
      const res = await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${created.id}`, payload: {} })
      expect(res.statusCode).toBe(200)
      expect(res.json()).toEqual(created)
      expect((await snapshotAccount(t, acme)).events).toBe(1)
    })

    it('custom_fields: null clears them all', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, ada)
      const res = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${created.id}`,
        payload: { custom_fields: null },
      })
      expect(res.json().custom_fields).toEqual({})
    })

    it('refuses to clear the last identifying field', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, { email: 'only@example.com' })
      const before = await snapshotAccount(t, acme)
      const res = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${created.id}`,
        payload: { email: null },
      })
      expectProblem(res, 400, 'invalid_parameter')
      expect(await snapshotAccount(t, acme)).toEqual(before)
    })

    it('refuses an email another contact has: 409, nothing changed', async () => {
      const acme = await t.createAccount()
      const first = await createContact(t, acme, { email: 'one@example.com' })
      const second = await createContact(t, acme, { email: 'two@example.com' })
      const before = await snapshotAccount(t, acme)
      const res = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${second.id}`,
        payload: { email: 'ONE@example.com' },
      })
      expect(expectProblem(res, 409, 'contact_exists').existing_id).toBe(first.id)
      expect(await snapshotAccount(t, acme)).toEqual(before)
    })

    it('refuses more than 50 custom fields in all after the merge', async () => {
      const acme = await t.createAccount()
      const fields = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`f${i}`, i]))
      const created = await createContact(t, acme, { email: 'many@example.com', custom_fields: fields })
      const res = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${created.id}`,
        payload: { custom_fields: { extra: 1 } },
      })
      expectProblem(res, 400, 'invalid_parameter')
    })

    it('concurrent patches of different custom fields both land', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, { email: 'race@example.com' })
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          t.inject(acme, {
            method: 'PATCH',
            url: `/api/v1/contacts/${created.id}`,
            payload: { custom_fields: { [`k${i}`]: i } },
          }),
        ),
      )
      const final = (await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${created.id}` })).json()
      expect(final.custom_fields).toEqual(Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, i])))
    })
  })

  describe('POST /contacts/upsert', () => {
    it('creates (201) then updates (200) by email, case-insensitively, with merge semantics', async () => {
      const acme = await t.createAccount()
      const first = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts/upsert',
        payload: { email: 'lin@example.com', first_name: 'Lin', custom_fields: { a: 1 } },
      })
      expect(first.statusCode).toBe(201)
      expect(first.headers.location).toBe(`http://api.test/api/v1/contacts/${first.json().id}`)
      const second = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts/upsert',
        payload: { email: 'LIN@example.com', last_name: 'Chen', custom_fields: { b: 2 } },
      })
      expect(second.statusCode).toBe(200)
      expect(second.json()).toMatchObject({
        id: first.json().id,
        email: 'LIN@example.com',
        first_name: 'Lin',
        last_name: 'Chen',
        custom_fields: { a: 1, b: 2 },
      })
      const list = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).json()
      expect(list.contacts).toHaveLength(1)
    })

    it('requires an email', async () => {
      const acme = await t.createAccount()
      const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts/upsert', payload: { first_name: 'X' } })
      expect(expectProblem(res, 400, 'invalid_parameter').errors).toEqual([{ field: 'email', message: 'is required' }])
    })

    it('concurrent upserts of one new email create exactly one contact', async () => {
      const acme = await t.createAccount()
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          t.inject(acme, {
            method: 'POST',
            url: '/api/v1/contacts/upsert',
            payload: { email: 'once@example.com', custom_fields: { [`n${i}`]: i } },
          }),
        ),
      )
      expect(results.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 201])
      const list = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).json()
      expect(list.contacts).toHaveLength(1)
    })
  })

  describe('DELETE /contacts/{id}', () => {
    it('deletes: 204, then 404; the deletion is an event carrying the contact', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, ada)
      const res = await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${created.id}` })
      expect(res.statusCode).toBe(204)
      expect(res.body).toBe('')
      expectProblem(await t.inject(acme, { method: 'GET', url: `/api/v1/contacts/${created.id}` }), 404, 'not_found')
      expectProblem(await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${created.id}` }), 404, 'not_found')
      const events = (await t.inject(acme, { method: 'GET', url: '/api/v1/events?type=contact.deleted' })).json().events
      expect(events).toHaveLength(1)
      expect(events[0].data.object).toEqual(created)
      expect((await snapshotAccount(t, acme)).tags).toEqual([])
      // The email is free again.
      await createContact(t, acme, { email: ada.email })
    })
  })

  describe('GET /contacts filters', () => {
    it('filters by email (exact, case-insensitive), tag, q (prefix of email, names, company), updated_after', async () => {
      const acme = await t.createAccount()
      const a = await createContact(t, acme, {
        email: 'ada@example.com',
        first_name: 'Ada',
        last_name: 'Lovelace',
        tags: ['vip'],
      })
      const b = await createContact(t, acme, {
        email: 'bob@example.org',
        first_name: 'Bob',
        company: 'Love 100%_Co',
        tags: ['lead'],
      })
      const c = await createContact(t, acme, { email: 'carol@example.com', last_name: 'Glove', tags: ['vip', 'lead'] })
      const ids = async (query: string) => {
        const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?${query}` })
        expect(res.statusCode, res.body).toBe(200)
        return res.json().contacts.map((x: { id: string }) => x.id)
      }
      expect(await ids('email=ADA@example.com')).toEqual([a.id])
      expect(await ids('email=ada@example')).toEqual([])
      expect(await ids('tag=vip')).toEqual([a.id, c.id])
      expect(await ids('tag=lead')).toEqual([b.id, c.id])
      expect(await ids('tag=VIP')).toEqual([])
      expect(await ids('q=love')).toEqual([a.id, b.id])
      expect(await ids('q=LOVE')).toEqual([a.id, b.id])
      expect(await ids('q=glove')).toEqual([c.id])
      expect(await ids('q=carol%40')).toEqual([c.id])
      expect(await ids(`q=${encodeURIComponent('love 100%_')}`)).toEqual([b.id])
      expect(await ids('q=%25')).toEqual([])
      expect(await ids('q=_')).toEqual([])
      expect(await ids('tag=vip&q=ada')).toEqual([a.id])
      expect(await ids('order=desc')).toEqual([c.id, b.id, a.id])

      const later = await t.inject(acme, {
        method: 'PATCH',
        url: `/api/v1/contacts/${a.id}`,
        payload: { job_title: 'Analyst' },
      })
      const since = new Date(new Date(later.json().updated_at).getTime() - 1).toISOString()
      expect(await ids(`updated_after=${encodeURIComponent(since)}`)).toEqual([a.id])
      expect(await ids('updated_after=2000-01-01T00:00:00%2B02:00')).toEqual([a.id, b.id, c.id])
    })

    it('q matches whatever Unicode form the name was typed in (composed or decomposed)', async () => {
      const acme = await t.createAccount()
      const zoe = await createContact(t, acme, { first_name: 'Zo\u00eb' })
      const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?q=${encodeURIComponent('zoe\u0308')}` })
      expect(res.json().contacts.map((c: { id: string }) => c.id)).toEqual([zoe.id])
    })

    it('an empty account lists {"contacts":[],"next_cursor":null}', async () => {
      const acme = await t.createAccount()
      const res = await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })
      expect(res.statusCode).toBe(200)
      expect(res.body).toBe('{"contacts":[],"next_cursor":null}')
    })

    it('rejects bad filter values with 400 naming the parameter', async () => {
      const acme = await t.createAccount()
      for (const [query, field] of [
        ['updated_after=yesterday', 'updated_after'],
        // RFC 3339 writes the offset with a colon; Ajv's own date-time format took this.
        ['updated_after=2026-11-24T14:03:26%2B0100', 'updated_after'],
        ['order=sideways', 'order'],
        ['tag=', 'tag'],
        ['account_id=acct_x', 'account_id'],
        ['api_key=x', 'api_key'],
      ]) {
        const res = await t.inject(acme, { method: 'GET', url: `/api/v1/contacts?${query}` })
        const body = expectProblem(res, 400, 'invalid_parameter')
        expect(body.errors[0].field, query).toBe(field)
      }
    })
  })

  describe('read-only keys', () => {
    it('can read but every write is 403 insufficient_scope and changes nothing', async () => {
      const acme = await t.createAccount()
      const created = await createContact(t, acme, { email: 'ro@example.com' })
      const reader = { ...acme, key: await t.createKey(acme, { scopes: ['read'] }) }
      expect((await t.inject(reader, { method: 'GET', url: '/api/v1/contacts' })).statusCode).toBe(200)
      expect((await t.inject(reader, { method: 'GET', url: '/api/v1/me' })).json().api_key.scopes).toEqual(['read'])
      const before = await snapshotAccount(t, acme)
      for (const request of [
        { method: 'POST' as const, url: '/api/v1/contacts', payload: { email: 'new@example.com' } },
        {
          method: 'POST' as const,
          url: '/api/v1/contacts/upsert',
          payload: { email: 'ro@example.com', first_name: 'X' },
        },
        { method: 'PATCH' as const, url: `/api/v1/contacts/${created.id}`, payload: { first_name: 'X' } },
        { method: 'DELETE' as const, url: `/api/v1/contacts/${created.id}` },
      ]) {
        expectProblem(await t.inject(reader, request), 403, 'insufficient_scope')
      }
      expect(await snapshotAccount(t, acme)).toEqual(before)
    })
  })
})
