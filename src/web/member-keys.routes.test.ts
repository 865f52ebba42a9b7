// Removing a person ends their API access too (docs/web-app.md, "Removing a person"): the
// confirmation lists the keys they created in either mode, the removal revokes them unless the
// owner keeps one by name, both audited; every key says who created it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { inviteAndAccept, shownKey, signUp, type WebClient } from '../../test/web-client.js'
import { listAudit } from '../audit/audit.js'

describe.each(testDialects())('removing a person and their keys on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  /** Issues a key from the web app's keys page (`test`: the test mode's page); the key and its id. */
  async function issue(client: WebClient, accountId: string, name: string, test = false) {
    const home = `/app/${accountId}${test ? '/test' : ''}`
    await client.get(`${home}/settings/api`)
    const res = await client.post(`${home}/settings/api/keys`, { name, scope: 'full', expires: 'never' })
    expect(res.statusCode, res.body.slice(0, 300)).toBe(303)
    const location = String(res.headers.location)
    const key = shownKey((await client.get(location)).body) as string
    const id = /keys\/(key_\w+)\/created/.exec(location)?.[1] as string
    return { key, id }
  }

  const api = (key: string) =>
    t.app.inject({ method: 'GET', url: '/api/v1/webhook_endpoints', headers: { authorization: `Bearer ${key}` } })

  const memberId = async (email: string) =>
    (await t.db.selectFrom('users').select('id').where('email_lower', '=', email).executeTakeFirstOrThrow()).id

  it('revokes the keys they created in both modes, keeps those the owner ticks, audits both', async () => {
    const owner = await signUp(t.app, 'keys-owner@example.com')
    const admin = (await signUp(t.app, 'keys-admin@example.com', 'Own')).client
    expect((await inviteAndAccept(owner, admin, 'keys-admin@example.com', 'admin')).statusCode).toBe(303)

    const ownersKey = await issue(owner.client, owner.accountId, 'Owner key')
    const live = await issue(admin, owner.accountId, 'Laptop script')
    const test = await issue(admin, owner.accountId, 'Sandbox', true)
    const kept = await issue(admin, owner.accountId, 'Billing sync')
    for (const { key } of [ownersKey, live, test, kept]) {
      expect((await api(key)).statusCode).toBe(200)
    }

    // Every key says who created it.
    const keysPage = await owner.client.get(`/app/${owner.accountId}/settings/api`)
    expect(keysPage.body).toMatch(new RegExp(`data-key-id="${live.id}"[\\s\\S]*?by keys-admin@example.com`))
    expect(keysPage.body).toMatch(new RegExp(`data-key-id="${ownersKey.id}"[\\s\\S]*?by keys-owner@example.com`))

    const adminId = await memberId('keys-admin@example.com')
    const confirm = await owner.client.get(`/app/${owner.accountId}/settings/members/${adminId}/remove`)
    expect(confirm.statusCode).toBe(200)
    const listed = [...confirm.body.matchAll(/name="keep" value="(key_\w+)"/g)].map((m) => m[1]).sort()
    expect(listed).toEqual([live.id, test.id, kept.id].sort())
    expect(confirm.body).toContain('Sandbox')
    expect(confirm.body).not.toContain('Owner key')

    // Made after the confirmation was shown: not named in `keep`, so revoked too.
    const late = await issue(admin, owner.accountId, 'Made meanwhile')
    const removed = await owner.client.post(`/app/${owner.accountId}/settings/members/${adminId}/remove`, {
      keep: kept.id,
    })
    expect(removed.statusCode, removed.body.slice(0, 300)).toBe(303)

    expect((await api(live.key)).statusCode).toBe(401)
    expect((await api(test.key)).statusCode).toBe(401)
    expect((await api(late.key)).statusCode).toBe(401)
    expect((await api(kept.key)).statusCode).toBe(200)
    expect((await api(ownersKey.key)).statusCode).toBe(200)

    const ownerId = await memberId('keys-owner@example.com')
    const liveAudit = await listAudit(t.db, owner.accountId, 50)
    const testAudit = await listAudit(t.db, `${owner.accountId}_test`, 50)
    const byTarget = (id: string) =>
      [...liveAudit, ...testAudit]
        .filter((entry) => entry.targetId === id && entry.action !== 'api_key.created')
        .map(({ action, actorUserId, detail }) => ({ action, actorUserId, reason: detail.reason }))
    for (const { id } of [live, test, late]) {
      expect(byTarget(id)).toEqual([{ action: 'api_key.revoked', actorUserId: ownerId, reason: 'creator_removed' }])
    }
    expect(byTarget(kept.id)).toEqual([{ action: 'api_key.kept', actorUserId: ownerId, reason: 'creator_removed' }])
    expect(byTarget(ownersKey.id)).toEqual([])
    const activity = await owner.client.get(`/app/${owner.accountId}/settings/api`)
    expect(activity.body).toContain('Key revoked: its creator left')
    expect(activity.body).toContain('Key kept after its creator left')
  })

  it('an owner who leaves loses the keys they made; keep names only their own keys', async () => {
    const first = await signUp(t.app, 'leaving-first@example.com')
    const second = (await signUp(t.app, 'leaving-second@example.com', 'X')).client
    expect((await inviteAndAccept(first, second, 'leaving-second@example.com', 'admin')).statusCode).toBe(303)
    const secondId = await memberId('leaving-second@example.com')
    // Made owner, so that they may remove themselves.
    await first.client.get(`/app/${first.accountId}/settings/members`)
    const promoted = await first.client.post(`/app/${first.accountId}/settings/members/${secondId}/role`, {
      role: 'owner',
    })
    expect(promoted.statusCode, promoted.body.slice(0, 300)).toBe(303)
    const firstKey = await issue(first.client, first.accountId, 'First')
    const secondKey = await issue(second, first.accountId, 'Second')

    await second.get(`/app/${first.accountId}/settings/members/${secondId}/remove`)
    // Naming another person's key, or junk, in `keep` keeps nothing of theirs and changes nothing else.
    const left = await second.post(`/app/${first.accountId}/settings/members/${secondId}/remove`, {
      keep: [firstKey.id, 'not-a-key'],
    })
    expect(left.statusCode, left.body.slice(0, 300)).toBe(303)
    expect(left.headers.location).toBe('/app')
    expect((await api(secondKey.key)).statusCode).toBe(401)
    expect((await api(firstKey.key)).statusCode).toBe(200)
  })
})
