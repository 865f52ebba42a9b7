// MAX_CONTACTS_PER_ACCOUNT (README.md#configuration): beyond it a create is 403 quota_exceeded and writes
// nothing; updates still work; deletes make room; other accounts are not affected.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem } from '../../test/helpers.js'
import { signUp } from '../../test/web-client.js'
import { contactCount } from './contact-count.js'

describe.each(testDialects())('the contact quota on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({ dialect, env: { MAX_CONTACTS_PER_ACCOUNT: '3' } })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  const contactsOf = async (account: TestAccount) =>
    (await t.inject(account, { method: 'GET', url: '/api/v1/contacts' })).json().contacts as Array<{ id: string }>

  it('refuses the create past the quota with 403 quota_exceeded, writing nothing (no contact, no event)', async () => {
    const ids: string[] = []
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
      ids.push((await createContact(t, acme, { email })).id)
    }
    const refused = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'd@example.com' },
    })
    expectProblem(refused, 403, 'quota_exceeded')
    expect(refused.json().detail).toContain('limit of 3 contacts')
    const upsertNew = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts/upsert',
      payload: { email: 'e@example.com' },
    })
    expectProblem(upsertNew, 403, 'quota_exceeded')
    expect((await contactsOf(acme)).map((c) => c.id)).toEqual(ids)
    const events = (await t.inject(acme, { method: 'GET', url: '/api/v1/events' })).json().events
    expect(events).toHaveLength(3)
    expect(await contactCount(t.db, acme.id)).toBe(3)

    // At the quota, an update (PATCH or upsert of a known email) still works.
    const upsertKnown = await t.inject(acme, {
      method: 'POST',
      url: '/api/v1/contacts/upsert',
      payload: { email: 'a@example.com', first_name: 'Ada' },
    })
    expect(upsertKnown.statusCode).toBe(200)
    // A delete makes room for one.
    expect((await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${ids[1]}` })).statusCode).toBe(204)
    expect(await contactCount(t.db, acme.id)).toBe(2)
    expect(
      (await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'd@example.com' } }))
        .statusCode,
    ).toBe(201)
    expectProblem(
      await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'f@example.com' } }),
      403,
      'quota_exceeded',
    )
  })

  it('is per account: one account at its quota does not limit another, and /me states it', async () => {
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
      await createContact(t, acme, { email })
    }
    const bob = await t.createAccount('Bob')
    expect(
      (await t.inject(bob, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'a@example.com' } }))
        .statusCode,
    ).toBe(201)
    const me = (await t.inject(acme, { method: 'GET', url: '/api/v1/me' })).json()
    expect(me.limits.contacts_max).toBe(3)
  })

  it('keeps an exact count through creates, upserts and deletes spread over its shards', async () => {
    const created: string[] = []
    for (let i = 0; i < 3; i++) {
      created.push((await createContact(t, acme, { email: `c${i}@example.com` })).id)
    }
    for (const id of created.slice(0, 2)) {
      await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${id}` })
    }
    await t.inject(acme, { method: 'POST', url: '/api/v1/contacts/upsert', payload: { email: 'n@example.com' } })
    expect(await contactCount(t.db, acme.id)).toBe((await contactsOf(acme)).length)
    expect(await contactCount(t.db, acme.id)).toBe(2)
  })

  it('refuses the web form past the quota with a 403 page that says why, writing nothing', async () => {
    const { client, accountId } = await signUp(t.app, 'quota@example.com')
    await client.get(`/app/${accountId}/contacts/new`)
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
      expect((await client.post(`/app/${accountId}/contacts`, { email })).statusCode).toBe(303)
    }
    const refused = await client.post(`/app/${accountId}/contacts`, { email: 'd@example.com' })
    expect(refused.statusCode).toBe(403)
    expect(refused.body).toContain('limit of 3 contacts')
    expect(await contactCount(t.db, accountId)).toBe(3)
  })
})
