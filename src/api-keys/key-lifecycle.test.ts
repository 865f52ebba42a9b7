// Issue, revoke, roll: each change commits with its audit entry, and a revoked or rolled-out key is
// pushed only once it is committed; a lost push is reported, never undoes the change.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { listAudit } from '../audit/audit.js'
import { addMembership } from '../users/users.store.js'
import { READ_ONLY_SCOPES } from './api-key.js'
import { findApiKey } from './api-keys.store.js'
import { issueKey, type KeyLifecycleDeps, revokeKey, rollKey } from './key-lifecycle.js'

const now = new Date('2026-11-24T12:00:00.000Z')
const person = { userId: 'usr_01KAAAAAAAAAAAAAAAAAAAAAAA', ip: '192.0.2.1' }

describe.each(testDialects())('key lifecycle on %s', (dialect) => {
  let t: TestHarness
  /** What each push saw: the digest, and whether the change was already visible outside its transaction. */
  let pushes: Array<{ keyHash: string; committed: boolean }>
  let pushSucceeds: boolean
  let deps: KeyLifecycleDeps
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    deps = {
      database: { db: t.db },
      config: { keyPrefix: t.deps.config.keyPrefix },
      keyRevocations: {
        async publish(keyHash) {
          const row = await t.db
            .selectFrom('api_keys')
            .select(['revoked_at', 'expires_at'])
            .where('key_hash', '=', keyHash)
            .executeTakeFirstOrThrow()
          pushes.push({ keyHash, committed: row.revoked_at !== null || row.expires_at !== null })
          return pushSucceeds
        },
      },
    }
  })
  afterAll(() => t.close())

  const setUp = async () => {
    pushes = []
    pushSucceeds = true
    const account = await t.createAccount()
    // A change made for a person needs them a member when it commits.
    await t.db
      .insertInto('users')
      .values({
        id: person.userId,
        email: 'p@example.com',
        email_lower: 'p@example.com',
        password_hash: 'x',
        created_at: now.toISOString(),
      })
      .onConflict((oc) => oc.doNothing())
      .execute()
    await addMembership(t.db, account.id, person.userId, 'admin', now)
    const issued = await issueKey(
      deps,
      account.id,
      { name: 'Reader', scopes: READ_ONLY_SCOPES, expiresAt: null },
      person,
      now,
    )
    const stored = await findApiKey(t.db, account.id, issued.apiKey.id, deps.config.keyPrefix)
    if (!stored) {
      throw new Error('issued key not found')
    }
    return { accountId: account.id, issued, stored }
  }
  const audit = async (accountId: string) =>
    (await listAudit(t.db, accountId, 10)).map(({ action, targetId, actorUserId, ip, detail }) => ({
      action,
      targetId,
      actorUserId,
      ip,
      detail,
    }))

  it('issueKey stores the key with its audit entry and returns the secret once', async () => {
    const { accountId, issued, stored } = await setUp()
    expect(issued.secret).toMatch(/^service_live_[A-Za-z0-9]{32}$/)
    expect(stored.apiKey).toMatchObject({ name: 'Reader', scopes: ['read'], expires_at: null, revoked_at: null })
    expect(await audit(accountId)).toEqual([
      {
        action: 'api_key.created',
        targetId: issued.apiKey.id,
        actorUserId: person.userId,
        ip: person.ip,
        detail: { name: 'Reader', scopes: ['read'], expires_at: null },
      },
      {
        // The account's first key, issued with the account (as the command line does).
        action: 'api_key.created',
        targetId: expect.any(String),
        actorUserId: null,
        ip: null,
        detail: { name: 'Default', scopes: ['read', 'write'], expires_at: null },
      },
    ])
    expect(pushes).toEqual([])
  })

  it('issueKey refuses a person removed meanwhile, and stores nothing', async () => {
    const { accountId } = await setUp()
    const stranger = { userId: 'usr_01KBBBBBBBBBBBBBBBBBBBBBBB', ip: '192.0.2.2' }
    const attempt = issueKey(
      deps,
      accountId,
      { name: 'Late', scopes: READ_ONLY_SCOPES, expiresAt: null },
      stranger,
      now,
    )
    await expect(attempt).rejects.toMatchObject({ code: 'not_found' })
    const names = await t.db.selectFrom('api_keys').select('name').where('account_id', '=', accountId).execute()
    expect(names.map((row) => row.name)).not.toContain('Late')
  })

  it('revokeKey revokes with one entry and pushes after the commit; again, no entry, pushed again', async () => {
    const { accountId, issued, stored } = await setUp()
    expect(await revokeKey(deps, stored, null, now)).toEqual({ pushed: true })
    expect(pushes).toEqual([{ keyHash: stored.keyHash, committed: true }])
    const later = new Date(now.getTime() + 1000)
    expect(await revokeKey(deps, stored, null, later)).toEqual({ pushed: true })
    expect(pushes).toHaveLength(2)
    expect((await findApiKey(t.db, accountId, issued.apiKey.id, deps.config.keyPrefix))?.apiKey.revoked_at).toBe(
      now.toISOString(),
    )
    expect((await audit(accountId)).map((e) => [e.action, e.actorUserId, e.detail])).toEqual([
      ['api_key.revoked', null, { name: 'Reader' }],
      ['api_key.created', person.userId, expect.any(Object)],
      ['api_key.created', null, expect.objectContaining({ name: 'Default' })],
    ])
  })

  it('a lost push is reported and the revocation stands', async () => {
    const { accountId, issued, stored } = await setUp()
    pushSucceeds = false
    expect(await revokeKey(deps, stored, person, now)).toEqual({ pushed: false })
    expect((await findApiKey(t.db, accountId, issued.apiKey.id, deps.config.keyPrefix))?.apiKey.revoked_at).toBe(
      now.toISOString(),
    )
  })

  it('rollKey issues a key of the same name and scopes, expires the old one after the overlap, pushes it', async () => {
    const { accountId, issued, stored } = await setUp()
    const rolled = await rollKey(deps, stored, 3600_000, person, now)
    expect(rolled.pushed).toBe(true)
    expect(rolled.secret).not.toBe(issued.secret)
    expect(rolled.apiKey).toMatchObject({ name: 'Reader', scopes: ['read'], expires_at: null })
    const oldExpiresAt = new Date(now.getTime() + 3600_000).toISOString()
    expect((await findApiKey(t.db, accountId, issued.apiKey.id, deps.config.keyPrefix))?.apiKey.expires_at).toBe(
      oldExpiresAt,
    )
    expect(pushes).toEqual([{ keyHash: stored.keyHash, committed: true }])
    expect((await audit(accountId))[0]).toEqual({
      action: 'api_key.rolled',
      targetId: issued.apiKey.id,
      actorUserId: person.userId,
      ip: person.ip,
      detail: { name: 'Reader', new_key_id: rolled.apiKey.id, old_key_expires_at: oldExpiresAt },
    })
  })

  it('nothing is pushed when the change rolls back', async () => {
    const { stored } = await setUp()
    // An expiry past year 275760 is no date: the roll fails inside its transaction, after it has
    // registered its push (rollKey registers it first).
    await expect(rollKey(deps, stored, 1e16, person, now)).rejects.toThrow(RangeError)
    expect(pushes).toEqual([])
  })
})
