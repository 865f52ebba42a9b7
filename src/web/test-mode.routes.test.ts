// Test mode in the web app, through HTTP as a browser sends it: the switch, the banner, the test
// pages acting on test data only, and "Delete all test data" (owners and admins, confirmed, in the
// background, resumed after a crash, live data untouched). docs/test-mode.md.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { inviteAndAccept, shownKey, signUp, webClient } from '../../test/web-client.js'
import { liveTenant, testTenant } from '../accounts/tenant.js'
import { createTestDataPurger } from '../accounts/test-data.js'

describe.each(testDialects())('test mode in the web app on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const rows = async (table: 'contacts' | 'events' | 'contact_imports', tenantId: string) =>
    (await t.db.selectFrom(table).select('id').where('account_id', '=', tenantId).execute()).length

  it('the header switches between the modes; a test page says so in a banner', async () => {
    const { client, accountId } = await signUp(t.app, 'switch@example.com')
    const livePage = await client.get(`/app/${accountId}/contacts`)
    expect(livePage.body).toContain(
      `<a class="switch" href="/app/${accountId}/test/contacts" role="switch" aria-checked="false">`,
    )
    expect(livePage.body).not.toContain('class="test-banner"')
    const testPage = await client.get(`/app/${accountId}/test/contacts`)
    expect(testPage.statusCode).toBe(200)
    expect(testPage.body).toContain('<body class="test-mode">')
    expect(testPage.body).toContain('class="test-banner"')
    expect(testPage.body).toMatch(/role="switch" aria-checked="true"/)
    expect(testPage.body).toContain(`href="/app/${accountId}/contacts" role="switch"`)
    // The API & Webhooks page switches to the same page in the other mode.
    const keys = await client.get(`/app/${accountId}/test/settings/api`)
    expect(keys.body).toContain(`href="/app/${accountId}/settings/api" role="switch"`)
    // And the webhooks page to the other mode's webhooks, under the same header tab.
    const webhooks = await client.get(`/app/${accountId}/test/settings/api/webhooks`)
    expect(webhooks.body).toContain(`href="/app/${accountId}/settings/api/webhooks" role="switch"`)
    expect(webhooks.body).toMatch(/settings\/api" aria-current="page">API &amp; Webhooks/)
  })

  it('a key made in test mode is a test key, listed in test mode only, and acts on test data', async () => {
    const { client, accountId } = await signUp(t.app, 'keys@example.com')
    await client.get(`/app/${accountId}/test/settings/api`)
    const made = await client.post(`/app/${accountId}/test/settings/api/keys`, {
      name: 'Sandbox',
      scope: 'full',
      expires: 'never',
    })
    expect(made.statusCode).toBe(303)
    expect(String(made.headers.location)).toMatch(new RegExp(`^/app/${accountId}/test/settings/api/keys/key_`))
    const key = shownKey((await client.get(String(made.headers.location))).body)
    expect(key).toMatch(/^service_test_/)
    expect((await client.get(`/app/${accountId}/test/settings/api`)).body).toContain('Sandbox')
    expect((await client.get(`/app/${accountId}/settings/api`)).body).not.toContain('Sandbox')

    const api = { id: accountId, name: 'Acme', key: key as string, keyId: '' }
    const created = await t.inject(api, { method: 'POST', url: '/api/v1/contacts', payload: { first_name: 'Tess' } })
    expect(created.json()).toMatchObject({ livemode: false })
    expect((await client.get(`/app/${accountId}/test/contacts`)).body).toContain('Tess')
    expect((await client.get(`/app/${accountId}/contacts`)).body).not.toContain('Tess')
  })

  it('contacts made on a test page are test contacts; CSV import and export stay in their mode', async () => {
    const { client, accountId } = await signUp(t.app, 'pages@example.com')
    await client.get(`/app/${accountId}/test/contacts/new`)
    const saved = await client.post(`/app/${accountId}/test/contacts`, {
      first_name: 'Paged',
      email: 'paged@example.com',
    })
    expect(saved.statusCode).toBe(303)
    expect(String(saved.headers.location)).toBe(`/app/${accountId}/test/contacts?notice=created`)
    expect(await rows('contacts', testTenant(accountId).id)).toBe(1)
    expect(await rows('contacts', accountId)).toBe(0)

    const uploaded = await client.uploadCsv(`${accountId}/test`, 'email,first_name\nimported@example.com,Imp\n')
    expect(uploaded.statusCode).toBe(303)
    expect(String(uploaded.headers.location)).toMatch(new RegExp(`^/app/${accountId}/test/contacts/imports/imp_`))
    await t.deps.imports.drain()
    expect(await rows('contacts', testTenant(accountId).id)).toBe(2)
    expect(await rows('contacts', accountId)).toBe(0)

    const exported = await client.get(`/app/${accountId}/test/contacts/export.csv`)
    expect(exported.body).toContain('imported@example.com')
    expect((await client.get(`/app/${accountId}/contacts/export.csv`)).body).not.toContain('imported@example.com')
  })

  it('members and sessions are the account’s, served in live mode only', async () => {
    const { client, accountId } = await signUp(t.app, 'account-pages@example.com')
    expect((await client.get(`/app/${accountId}/test/settings/members`)).statusCode).toBe(404)
    expect((await client.get(`/app/${accountId}/settings/members`)).statusCode).toBe(200)
    // The test page's Members tab leads to the account's one page.
    expect((await client.get(`/app/${accountId}/test/settings/api`)).body).toContain(
      `href="/app/${accountId}/settings/members"`,
    )
  })

  it('deletes all test data in the background, audited, and nothing live', async () => {
    const { client, accountId } = await signUp(t.app, 'delete@example.com')
    const live = liveTenant(accountId)
    const test = testTenant(accountId)
    for (const [tenant, name] of [
      [live, 'Kept'],
      [test, 'Gone'],
      [test, 'Gone too'],
    ] as const) {
      await t.deps.contacts.create(tenant, { first_name: name })
    }
    const liveBefore = { contacts: await rows('contacts', accountId), events: await rows('events', accountId) }

    const page = await client.get(`/app/${accountId}/test/settings/api`)
    expect(page.body).toContain('Delete all test data…')
    const confirm = await client.get(`/app/${accountId}/test/settings/test-data/delete`)
    expect(confirm.statusCode).toBe(200)
    expect(confirm.body).toContain('Delete all test data of Acme?')
    const done = await client.post(`/app/${accountId}/test/settings/test-data/delete`, {})
    expect(done.statusCode).toBe(303)
    expect(String(done.headers.location)).toBe(`/app/${accountId}/test/settings/api?notice=test-data-deleting`)
    await t.deps.testData.drain()

    expect(await rows('contacts', test.id)).toBe(0)
    expect(await rows('events', test.id)).toBe(0)
    expect({ contacts: await rows('contacts', accountId), events: await rows('events', accountId) }).toEqual(liveBefore)
    const after = await client.get(`/app/${accountId}/test/settings/api`)
    expect(after.body).toContain('All test data deleted')
    expect(after.body).not.toContain('is being deleted')
    // The live page offers no such thing, nor does the route exist there.
    expect((await client.get(`/app/${accountId}/settings/api`)).body).not.toContain('Delete all test data')
    expect((await client.get(`/app/${accountId}/settings/test-data/delete`)).statusCode).toBe(404)
  })

  it('a member cannot delete the test data, and a forged post deletes nothing', async () => {
    const owner = await signUp(t.app, 'owner-td@example.com')
    const member = webClient(t.app)
    await member.get('/sign-up')
    await member.post('/sign-up', {
      email: 'member-td@example.com',
      password: 'correct-horse-battery',
      account_name: 'Own',
    })
    await inviteAndAccept(owner, member, 'member-td@example.com', 'member')
    const test = testTenant(owner.accountId)
    await t.deps.contacts.create(test, { first_name: 'Stays' })

    expect((await member.get(`/app/${owner.accountId}/test/settings/test-data/delete`)).statusCode).toBe(403)
    await member.get(`/app/${owner.accountId}/test/contacts`)
    expect((await member.post(`/app/${owner.accountId}/test/settings/test-data/delete`, {})).statusCode).toBe(403)
    // The owner's session, without the form's token (another site's form).
    const forged = await t.app.inject({
      method: 'POST',
      url: `/app/${owner.accountId}/test/settings/test-data/delete`,
      headers: {
        cookie: [...owner.client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        'content-type': 'application/x-www-form-urlencoded',
      },
      payload: '',
    })
    expect(forged.statusCode).toBe(403)
    await t.deps.testData.drain()
    expect(await rows('contacts', test.id)).toBe(1)
    const marked = await t.db
      .selectFrom('accounts')
      .select('purge_requested_at')
      .where('id', '=', test.id)
      .executeTakeFirst()
    expect(marked?.purge_requested_at).toBeNull()
  })

  it('a deletion cut short by a crash is resumed by the next process', async () => {
    const { accountId } = await signUp(t.app, 'resume@example.com')
    const test = testTenant(accountId)
    for (let i = 0; i < 3; i++) {
      await t.deps.contacts.create(test, { first_name: `R${i}` })
    }
    await t.deps.contacts.create(liveTenant(accountId), { first_name: 'Live' })
    // As the crashed process left it: asked for, part of the data deleted.
    await t.db
      .updateTable('accounts')
      .set({ purge_requested_at: new Date().toISOString() })
      .where('id', '=', test.id)
      .execute()
    await t.deps.contacts.purgeTest(test, 1)
    expect(await rows('contacts', test.id)).toBe(2)

    const next = createTestDataPurger({ db: t.db, contacts: t.deps.contacts, clock: t.deps.clock })
    await next.drain()
    await next.stop()
    expect(await rows('contacts', test.id)).toBe(0)
    expect(await rows('contacts', accountId)).toBe(1)
  })
})
