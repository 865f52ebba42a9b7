import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { signUp, type WebClient, webClient } from '../../test/web-client.js'
import { createInvitation, INVITATIONS_PER_HOUR } from '../invitations/invitations.store.js'
import { manualClock } from '../lib/clock.js'
import { purgeExpiredSessions, SESSION_TTL_MS } from '../users/sessions.store.js'

const DAY = 24 * 3600 * 1000
const FORM_TYPE = 'application/x-www-form-urlencoded'

/** The invitation link on the page the invite POST redirects to. */
const shownLink = (body: string): string | undefined =>
  /id="invitation-link" type="text" readonly value="([^"]+)"/.exec(body)?.[1]

/** Invites `email` as `role` from the owner's members page; returns the link's path (shown once). */
async function invite(owner: WebClient, accountId: string, email: string, role = 'member'): Promise<string> {
  await owner.get(`/app/${accountId}/settings/members`)
  const res = await owner.post(`/app/${accountId}/settings/members`, { email, role })
  expect(res.statusCode, res.body.slice(0, 300)).toBe(303)
  const page = await owner.get(String(res.headers.location))
  const link = shownLink(page.body)
  expect(link).toBeDefined()
  return new URL(link as string).pathname
}

async function accept(client: WebClient, path: string) {
  await client.get(path)
  return client.post(`${path}/accept`, {})
}

describe.each(testDialects())('members, invitations, roles and sessions on %s', (dialect) => {
  const clock = manualClock(new Date('2026-11-24T12:00:00.000Z'))
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, clock })
  })
  afterAll(() => t.close())

  const userId = async (email: string) =>
    (await t.db.selectFrom('users').select('id').where('email_lower', '=', email).executeTakeFirstOrThrow()).id
  const membership = (accountId: string, email: string) =>
    t.db
      .selectFrom('memberships')
      .innerJoin('users', 'users.id', 'memberships.user_id')
      .select('memberships.role')
      .where('memberships.account_id', '=', accountId)
      .where('users.email_lower', '=', email.toLowerCase())
      .executeTakeFirst()

  describe('invitations', () => {
    it('a link shown once, stored as a digest, accepted once by the invited email only', async () => {
      const owner = await signUp(t.app, 'inv-owner@example.com')
      // Signed up before the invitation, with the invited email: gains nothing until it accepts.
      const invited = await signUp(t.app, 'Invited@example.com', 'Invited Co')
      const other = await signUp(t.app, 'inv-other@example.com', 'Other Co')

      await owner.client.get(`/app/${owner.accountId}/settings/members`)
      const res = await owner.client.post(`/app/${owner.accountId}/settings/members`, {
        email: 'invited@EXAMPLE.com',
        role: 'admin',
      })
      expect(res.statusCode).toBe(303)
      expect(shownLink(res.body)).toBeUndefined()
      const created = await owner.client.get(String(res.headers.location))
      expect(created.headers['cache-control']).toBe('no-store')
      const link = shownLink(created.body) as string
      expect(link).toMatch(/^http:\/\/api\.test\/invitations\/[A-Za-z0-9_-]{43}$/)
      const path = new URL(link).pathname
      // Reload: the link is not shown again.
      const reload = await owner.client.get(String(res.headers.location))
      expect(reload.statusCode).toBe(303)
      expect(shownLink(reload.body)).toBeUndefined()
      // Only a digest is stored.
      const token = path.split('/').pop() as string
      const rows = await t.db.selectFrom('invitations').selectAll().where('account_id', '=', owner.accountId).execute()
      expect(rows).toHaveLength(1)
      expect(JSON.stringify(rows)).not.toContain(token)
      expect(await membership(owner.accountId, 'invited@example.com')).toBeUndefined()
      expect((await invited.client.get(`/app/${owner.accountId}/contacts`)).statusCode).toBe(404)

      // Signed out: told to sign in or sign up first.
      const anonymous = webClient(t.app)
      const signedOut = await anonymous.get(path)
      expect(signedOut.statusCode).toBe(200)
      expect(signedOut.body).toContain('Sign in as <strong>invited@EXAMPLE.com</strong>, or sign up')
      await anonymous.get('/sign-in')
      const anonymousPost = await anonymous.post(`${path}/accept`, {})
      expect(anonymousPost.statusCode).toBe(303)
      expect(anonymousPost.headers.location).toBe(path)
      expect(await membership(owner.accountId, 'invited@example.com')).toBeUndefined()

      // Another signed-in person: refused, by the page and by a forged post, and nothing changes.
      const refused = await other.client.get(path)
      expect(refused.statusCode).toBe(403)
      expect(refused.body).toContain('This invitation is for another email')
      expect(refused.body).not.toContain('Accept invitation')
      await other.client.get(`/app/${other.accountId}/contacts`)
      expect((await other.client.post(`${path}/accept`, {})).statusCode).toBe(403)
      expect(await membership(owner.accountId, 'inv-other@example.com')).toBeUndefined()

      // The invited person (email compared case-insensitively) accepts: member with the role.
      const accepted = await accept(invited.client, path)
      expect(accepted.statusCode).toBe(303)
      expect(accepted.headers.location).toBe(`/app/${owner.accountId}/contacts`)
      expect(await membership(owner.accountId, 'invited@example.com')).toEqual({ role: 'admin' })
      expect((await invited.client.get(`/app/${owner.accountId}/contacts`)).statusCode).toBe(200)
      // Single use.
      expect((await invited.client.get(path)).statusCode).toBe(404)
      expect((await invited.client.post(`${path}/accept`, {})).statusCode).toBe(404)
      const members = await owner.client.get(`/app/${owner.accountId}/settings/members`)
      expect(members.body).toContain('Invited@example.com')
      expect(members.body).toContain('Pending invitations</h2>\n<p class="hint">None.</p>')
    })

    it('someone without an account signs up, then accepts; the link expires after 7 days; revoked links stop', async () => {
      const owner = await signUp(t.app, 'inv2-owner@example.com')
      const path = await invite(owner.client, owner.accountId, 'newhire@example.com')
      const newcomer = await signUp(t.app, 'newhire@example.com', 'Own Co')
      expect((await accept(newcomer.client, path)).statusCode).toBe(303)
      expect(await membership(owner.accountId, 'newhire@example.com')).toEqual({ role: 'member' })

      const late = await invite(owner.client, owner.accountId, 'late@example.com')
      const revoked = await invite(owner.client, owner.accountId, 'revoked@example.com')
      const page = await owner.client.get(`/app/${owner.accountId}/settings/members`)
      expect(page.body).toContain('Revoke<span class="visually-hidden"> invitation for revoked@example.com</span>')
      const ids = [...page.body.matchAll(/invitations\/(inv_\w+)\/revoke/g)].map((m) => m[1])
      expect(ids).toHaveLength(2)
      const revokedId = (
        await t.db
          .selectFrom('invitations')
          .select('id')
          .where('email', '=', 'revoked@example.com')
          .executeTakeFirstOrThrow()
      ).id
      expect(ids).toContain(revokedId)
      expect(
        (await owner.client.post(`/app/${owner.accountId}/settings/members/invitations/${revokedId}/revoke`, {}))
          .statusCode,
      ).toBe(303)
      const revokedPerson = await signUp(t.app, 'revoked@example.com', 'R Co')
      expect((await revokedPerson.client.get(revoked)).statusCode).toBe(404)
      expect(await membership(owner.accountId, 'revoked@example.com')).toBeUndefined()

      const latePerson = await signUp(t.app, 'late@example.com', 'L Co')
      clock.advance(7 * DAY + 1000)
      try {
        expect((await latePerson.client.get(late)).statusCode).toBe(404)
        expect((await latePerson.client.post(`${late}/accept`, {})).statusCode).toBe(404)
        expect(await membership(owner.accountId, 'late@example.com')).toBeUndefined()
      } finally {
        clock.advance(-(7 * DAY + 1000))
      }
    })

    it('an invitation accepted by someone already a member uses it up and keeps their role; two accepts add one membership', async () => {
      const owner = await signUp(t.app, 'inv5-owner@example.com')
      const admin = await signUp(t.app, 'inv5-admin@example.com', 'A Co')
      expect(
        (await accept(admin.client, await invite(owner.client, owner.accountId, 'inv5-admin@example.com', 'admin')))
          .statusCode,
      ).toBe(303)
      // The form refuses to invite a member again; a link made before they joined still may reach them.
      const ownerId = await userId('inv5-owner@example.com')
      const { token } = await createInvitation(t.db, owner.accountId, {
        email: 'inv5-admin@example.com',
        role: 'member',
        invitedBy: ownerId,
        clientKey: '127.0.0.1',
        now: clock.now(),
      })
      const again = `/invitations/${token}`
      const res = await accept(admin.client, again)
      expect(res.statusCode).toBe(303)
      expect(res.headers.location).toBe(`/app/${owner.accountId}/contacts`)
      expect(await membership(owner.accountId, 'inv5-admin@example.com')).toEqual({ role: 'admin' })
      expect((await admin.client.get(again)).statusCode).toBe(404)

      const twice = await signUp(t.app, 'inv5-twice@example.com', 'T Co')
      const link = await invite(owner.client, owner.accountId, 'inv5-twice@example.com')
      await twice.client.get(link)
      const both = await Promise.all([twice.client.post(`${link}/accept`, {}), twice.client.post(`${link}/accept`, {})])
      expect(both.map((r) => r.statusCode).sort()).toEqual([303, 404])
      expect(await membership(owner.accountId, 'inv5-twice@example.com')).toEqual({ role: 'member' })
    })

    it('the form answers alike for registered and unregistered emails, and bad input is a 400 on the page', async () => {
      const owner = await signUp(t.app, 'inv3-owner@example.com')
      await signUp(t.app, 'registered@example.com', 'Reg Co')
      const answers = []
      for (const email of ['registered@example.com', 'unregistered@example.com']) {
        await owner.client.get(`/app/${owner.accountId}/settings/members`)
        const res = await owner.client.post(`/app/${owner.accountId}/settings/members`, { email, role: 'member' })
        const page = await owner.client.get(String(res.headers.location))
        answers.push({
          status: res.statusCode,
          page: page.body.replaceAll(/[A-Za-z0-9_-]{43}|inv_\w+|registered|unregistered/g, 'X'),
        })
      }
      expect(answers[0]).toEqual(answers[1])
      await owner.client.get(`/app/${owner.accountId}/settings/members`)
      const bad = await owner.client.post(`/app/${owner.accountId}/settings/members`, { email: 'nope', role: 'member' })
      expect(bad.statusCode).toBe(400)
      expect(bad.body).toContain('Enter an email address')
      const owner2 = await owner.client.post(`/app/${owner.accountId}/settings/members`, {
        email: 'x@example.com',
        role: 'owner',
      })
      expect(owner2.statusCode).toBe(400)
    })

    it(`throttles invitations: ${INVITATIONS_PER_HOUR} an hour per account and per address (IPv6 /64), then a 429 page`, async () => {
      const owner = await signUp(t.app, 'inv4-owner@example.com')
      const second = await signUp(t.app, 'inv4-second@example.com', 'Second Co')
      const post = (client: WebClient, accountId: string, email: string, ip: string) =>
        t.app.inject({
          method: 'POST',
          url: `/app/${accountId}/settings/members`,
          remoteAddress: ip,
          headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'content-type': FORM_TYPE },
          payload: new URLSearchParams({ _csrf: client.csrf(), email, role: 'member' }).toString(),
        })
      await owner.client.get(`/app/${owner.accountId}/settings/members`)
      for (let i = 0; i < INVITATIONS_PER_HOUR; i++) {
        expect(
          (await post(owner.client, owner.accountId, `p${i}@example.com`, `2001:db8:1:2::${i + 1}`)).statusCode,
        ).toBe(303)
      }
      const limited = await post(owner.client, owner.accountId, 'one-more@example.com', '2001:db8:1:2::99')
      expect(limited.statusCode).toBe(429)
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0)
      expect(limited.headers['content-type']).toContain('text/html')
      // Another account from the same /64: the address's budget is spent too.
      await second.client.get(`/app/${second.accountId}/settings/members`)
      expect((await post(second.client, second.accountId, 'a@example.com', '2001:db8:1:2:ffff::1')).statusCode).toBe(
        429,
      )
      // From another address, that account may invite; the first account may not, from anywhere.
      expect((await post(second.client, second.accountId, 'b@example.com', '2001:db8:9::1')).statusCode).toBe(303)
      expect((await post(owner.client, owner.accountId, 'c@example.com', '192.0.2.7')).statusCode).toBe(429)
      const count = await t.db
        .selectFrom('invitations')
        .select('id')
        .where('account_id', '=', owner.accountId)
        .execute()
      expect(count).toHaveLength(INVITATIONS_PER_HOUR)
      // An hour later the window has moved.
      clock.advance(3600 * 1000 + 1000)
      try {
        expect((await post(owner.client, owner.accountId, 'd@example.com', '192.0.2.7')).statusCode).toBe(303)
      } finally {
        clock.advance(-(3600 * 1000 + 1000))
      }
    })
  })

  describe('roles', () => {
    type Role = 'owner' | 'admin' | 'member'
    interface Team {
      accountId: string
      clients: Record<Role, WebClient>
      ids: Record<Role, string>
      ownerFullKey: string
      ownerReadKey: string
    }
    let team: Team
    const createKey = async (client: WebClient, accountId: string, scope: 'full' | 'read') => {
      await client.get(`/app/${accountId}/settings/api`)
      const res = await client.post(`/app/${accountId}/settings/api/keys`, {
        name: `k-${scope}`,
        scope,
        expires: 'never',
      })
      return /keys\/(key_\w+)\/created/.exec(String(res.headers.location))?.[1] as string
    }

    beforeAll(async () => {
      const owner = await signUp(t.app, 'role-owner@example.com')
      const admin = await signUp(t.app, 'role-admin@example.com', 'Admin Co')
      const member = await signUp(t.app, 'role-member@example.com', 'Member Co')
      expect(
        (await accept(admin.client, await invite(owner.client, owner.accountId, 'role-admin@example.com', 'admin')))
          .statusCode,
      ).toBe(303)
      expect(
        (await accept(member.client, await invite(owner.client, owner.accountId, 'role-member@example.com')))
          .statusCode,
      ).toBe(303)
      team = {
        accountId: owner.accountId,
        clients: { owner: owner.client, admin: admin.client, member: member.client },
        ids: {
          owner: await userId('role-owner@example.com'),
          admin: await userId('role-admin@example.com'),
          member: await userId('role-member@example.com'),
        },
        ownerFullKey: await createKey(owner.client, owner.accountId, 'full'),
        ownerReadKey: await createKey(owner.client, owner.accountId, 'read'),
      }
    })

    // What each role may open (GET) or do (POST, forged with a valid CSRF token of its own session).
    // `changed` reads what the action would change, so a refusal is checked to change nothing.
    interface Case {
      name: string
      method: 'GET' | 'POST'
      path: (team: Team) => string
      fields?: Record<string, string>
      allowed: Role[]
      changed?: (team: Team) => Promise<unknown>
      /** Run for the refused roles only: the allowed ones would change the team (other tests do it). */
      refusalsOnly?: boolean
    }
    const invitations = (tm: Team) =>
      t.db.selectFrom('invitations').select(['id', 'revoked_at']).where('account_id', '=', tm.accountId).execute()
    const memberRows = (tm: Team) =>
      t.db
        .selectFrom('memberships')
        .select(['user_id', 'role'])
        .where('account_id', '=', tm.accountId)
        .orderBy('user_id')
        .execute()
    const keys = (tm: Team) =>
      t.db
        .selectFrom('api_keys')
        .select(['id', 'revoked_at', 'expires_at'])
        .where('account_id', '=', tm.accountId)
        .orderBy('id')
        .execute()
    const endpoints = (tm: Team) =>
      t.db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', tm.accountId).execute()
    const base = (tm: Team) => `/app/${tm.accountId}`
    const CASES: Case[] = [
      {
        name: 'settings page',
        method: 'GET',
        path: (tm) => `${base(tm)}/settings`,
        allowed: ['owner', 'admin', 'member'],
      },
      { name: 'contacts', method: 'GET', path: (tm) => `${base(tm)}/contacts`, allowed: ['owner', 'admin', 'member'] },
      { name: 'members page', method: 'GET', path: (tm) => `${base(tm)}/settings/members`, allowed: ['owner'] },
      {
        name: 'remove confirmation',
        method: 'GET',
        path: (tm) => `${base(tm)}/settings/members/${tm.ids.admin}/remove`,
        allowed: ['owner'],
      },
      {
        name: 'invite',
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/members`,
        fields: { email: 'forged@example.com', role: 'admin' },
        allowed: ['owner'],
        changed: invitations,
      },
      {
        name: 'change a role',
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/members/${tm.ids.member}/role`,
        fields: { role: 'owner' },
        allowed: ['owner'],
        refusalsOnly: true,
        changed: memberRows,
      },
      {
        name: 'remove the owner',
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/members/${tm.ids.owner}/remove`,
        allowed: ['owner'],
        refusalsOnly: true,
        changed: memberRows,
      },
      {
        name: 'keys page',
        method: 'GET',
        path: (tm) => `${base(tm)}/settings/api`,
        allowed: ['owner', 'admin', 'member'],
      },
      {
        name: 'create a full-access key',
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/api/keys`,
        fields: { name: 'forged', scope: 'full', expires: 'never' },
        allowed: ['owner', 'admin'],
        changed: keys,
      },
      {
        name: "revoke confirmation of the owner's full-access key",
        method: 'GET',
        path: (tm) => `${base(tm)}/settings/api/keys/${tm.ownerFullKey}/revoke`,
        allowed: ['owner', 'admin'],
      },
      {
        name: "revoke the owner's full-access key",
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/api/keys/${tm.ownerFullKey}/revoke`,
        allowed: ['owner', 'admin'],
        refusalsOnly: true,
        changed: keys,
      },
      {
        name: "revoke the owner's read-only key",
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/api/keys/${tm.ownerReadKey}/revoke`,
        allowed: ['owner', 'admin'],
        refusalsOnly: true,
        changed: keys,
      },
      {
        name: "roll the owner's read-only key",
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/api/keys/${tm.ownerReadKey}/roll`,
        fields: { overlap: '1h' },
        allowed: ['owner', 'admin'],
        refusalsOnly: true,
        changed: keys,
      },
      {
        name: 'webhooks form',
        method: 'GET',
        path: (tm) => `${base(tm)}/settings/api/webhooks/new`,
        allowed: ['owner', 'admin'],
      },
      {
        name: 'create a webhook endpoint',
        method: 'POST',
        path: (tm) => `${base(tm)}/settings/api/webhooks`,
        fields: { url: 'https://hooks.example.com/x', events: '*' },
        allowed: ['owner', 'admin'],
        refusalsOnly: true,
        changed: endpoints,
      },
    ]
    const cells = CASES.flatMap((c) => (['admin', 'member', 'owner'] as const).map((role) => ({ ...c, role })))

    it.each(cells)('$role: $method $name', async (c) => {
      const client = team.clients[c.role]
      const allowed = c.allowed.includes(c.role)
      if (c.method === 'GET') {
        const res = await client.get(c.path(team))
        expect(res.statusCode, res.body.slice(0, 200)).toBe(allowed ? 200 : 403)
        return
      }
      if (allowed && c.refusalsOnly) {
        return
      }
      await client.get(`${base(team)}/contacts`)
      const before = await c.changed?.(team)
      const res = await client.post(c.path(team), c.fields ?? {})
      if (allowed) {
        expect(res.statusCode, res.body.slice(0, 200)).toBe(303)
        return
      }
      expect(res.statusCode, res.body.slice(0, 200)).toBe(403)
      // Every refusal reads the same, whichever check made it (the role hook or a key's scope).
      expect(res.body).toContain('<h1>Not allowed</h1>')
      expect(await c.changed?.(team)).toEqual(before)
    })

    it("a member who spends their hourly key budget leaves the owner's own budget whole", async () => {
      const owner = await signUp(t.app, 'budget-owner@example.com')
      const member = await signUp(t.app, 'budget-member@example.com', 'B Co')
      await accept(member.client, await invite(owner.client, owner.accountId, 'budget-member@example.com'))
      for (let i = 0; i < 30; i++) {
        expect(await createKey(member.client, owner.accountId, 'read')).toMatch(/^key_/)
      }
      await member.client.get(`/app/${owner.accountId}/settings/api`)
      const refused = await member.client.post(`/app/${owner.accountId}/settings/api/keys`, {
        name: 'one more',
        scope: 'read',
        expires: 'never',
      })
      expect(refused.statusCode).toBe(429)
      const ownersKey = await createKey(owner.client, owner.accountId, 'full')
      expect(ownersKey).toMatch(/^key_/)
    })

    it('a member revokes read-only keys they created themselves, and no other', async () => {
      const member = team.clients.member
      const own = await createKey(member, team.accountId, 'read')
      expect(own).toMatch(/^key_/)
      // The page offers Roll and Revoke on their own read-only key only, not on the owner's keys.
      const page = (await member.get(`${base(team)}/settings/api`)).body
      expect(page).toContain(`/settings/api/keys/${own}/revoke`)
      expect(page).toContain(`data-key-id="${team.ownerReadKey}"`)
      expect(page).not.toContain(`/settings/api/keys/${team.ownerReadKey}/revoke`)
      expect(page).not.toContain(`/settings/api/keys/${team.ownerReadKey}/roll`)
      expect((await member.post(`${base(team)}/settings/api/keys/${own}/revoke`, {})).statusCode).toBe(303)
      const refused = await member.post(`${base(team)}/settings/api/keys/${team.ownerReadKey}/revoke`, {})
      expect(refused.statusCode).toBe(403)
      expect(refused.body).toContain('<h1>Not allowed</h1>')
    })
  })

  describe('changing roles and removing members', () => {
    it('owners change roles and remove members; the removed member is refused at once; the last owner stays', async () => {
      const owner = await signUp(t.app, 'rm-owner@example.com')
      const member = await signUp(t.app, 'rm-member@example.com', 'M Co')
      expect(
        (await accept(member.client, await invite(owner.client, owner.accountId, 'rm-member@example.com'))).statusCode,
      ).toBe(303)
      const memberId = await userId('rm-member@example.com')
      const ownerId = await userId('rm-owner@example.com')
      const members = `/app/${owner.accountId}/settings/members`

      // The last owner can neither leave nor step down.
      await owner.client.get(members)
      const leave = await owner.client.post(`${members}/${ownerId}/remove`, {})
      expect(leave.statusCode).toBe(409)
      expect(leave.body).toContain('An account keeps at least one owner')
      expect((await owner.client.post(`${members}/${ownerId}/role`, { role: 'admin' })).statusCode).toBe(409)
      expect(await membership(owner.accountId, 'rm-owner@example.com')).toEqual({ role: 'owner' })

      // Promote to admin: the member now sees the webhooks form.
      expect((await member.client.get(`/app/${owner.accountId}/settings/api/webhooks/new`)).statusCode).toBe(403)
      expect((await owner.client.post(`${members}/${memberId}/role`, { role: 'admin' })).statusCode).toBe(303)
      expect((await member.client.get(`/app/${owner.accountId}/settings/api/webhooks/new`)).statusCode).toBe(200)
      expect((await owner.client.post(`${members}/${memberId}/role`, { role: 'boss' })).statusCode).toBe(400)

      // The form will not invite a current member again (409, no link) ...
      await owner.client.get(members)
      const again = await owner.client.post(members, { email: 'RM-member@example.com', role: 'admin' })
      expect(again.statusCode).toBe(409)
      expect(again.body).toContain('is already a member of this account')
      // ... and an invitation still pending at the removal (made here directly: one sent before they
      // joined some other way) stops working with it.
      const { token } = await createInvitation(t.db, owner.accountId, {
        email: 'rm-member@example.com',
        role: 'admin',
        invitedBy: ownerId,
        clientKey: '127.0.0.1',
        now: clock.now(),
      })
      const pendingLink = `/invitations/${token}`

      // Removal: confirmation first, then the member's next request to the account is refused.
      const confirm = await owner.client.get(`${members}/${memberId}/remove`)
      expect(confirm.body).toContain('Remove rm-member@example.com?')
      expect((await owner.client.post(`${members}/${memberId}/remove`, {})).statusCode).toBe(303)
      expect((await member.client.get(`/app/${owner.accountId}/contacts`)).statusCode).toBe(404)
      await member.client.get(`/app/${member.accountId}/contacts`)
      expect((await member.client.post(`/app/${owner.accountId}/contacts`, { first_name: 'X' })).statusCode).toBe(404)
      expect(await membership(owner.accountId, 'rm-member@example.com')).toBeUndefined()
      expect((await accept(member.client, pendingLink)).statusCode).toBe(404)
      expect(await membership(owner.accountId, 'rm-member@example.com')).toBeUndefined()
      // Their own account still works: the session ends for that account only.
      expect((await member.client.get(`/app/${member.accountId}/contacts`)).statusCode).toBe(200)
      expect((await owner.client.post(`${members}/${memberId}/remove`, {})).statusCode).toBe(404)
    })

    it('with a second owner, an owner may step down or leave', async () => {
      const owner = await signUp(t.app, 'two-owner@example.com')
      const second = await signUp(t.app, 'two-second@example.com', 'S Co')
      const members = `/app/${owner.accountId}/settings/members`
      await accept(second.client, await invite(owner.client, owner.accountId, 'two-second@example.com', 'admin'))
      const secondId = await userId('two-second@example.com')
      const ownerId = await userId('two-owner@example.com')
      await owner.client.get(members)
      expect((await owner.client.post(`${members}/${secondId}/role`, { role: 'owner' })).statusCode).toBe(303)
      const stepDown = await owner.client.post(`${members}/${ownerId}/role`, { role: 'member' })
      expect(stepDown.statusCode).toBe(303)
      expect(stepDown.headers.location).toBe(`/app/${owner.accountId}/settings`)
      expect((await owner.client.get(members)).statusCode).toBe(403)
      await second.client.get(members)
      expect((await second.client.post(`${members}/${ownerId}/remove`, {})).statusCode).toBe(303)
      expect((await owner.client.get(`/app/${owner.accountId}/contacts`)).statusCode).toBe(404)
    })
  })

  describe('sessions', () => {
    const signIn = async (email: string, userAgent: string) => {
      const client = webClient(t.app)
      await client.get('/sign-in')
      const res = await t.app.inject({
        method: 'POST',
        url: '/sign-in',
        headers: {
          cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          'content-type': FORM_TYPE,
          'user-agent': userAgent,
        },
        payload: new URLSearchParams({ _csrf: client.csrf(), email, password: 'correct-horse-battery' }).toString(),
      })
      expect(res.statusCode).toBe(303)
      const sid = res.cookies.find((c) => c.name === 'sid')?.value as string
      client.cookies.set('sid', sid)
      return client
    }
    const withAgent = (client: WebClient, url: string, userAgent: string) =>
      t.app.inject({
        method: 'GET',
        url,
        headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'user-agent': userAgent },
      })

    it('lists the person’s sessions (this one marked); "sign out everywhere else" ends the others at once', async () => {
      const { client: first, accountId } = await signUp(t.app, 'sess@example.com')
      const phone = await signIn('sess@example.com', 'PhoneBrowser/1.0')
      await withAgent(first, `/app/${accountId}/contacts`, 'DesktopBrowser/2.0')
      clock.advance(2 * 60 * 1000)
      try {
        // The old address leads to the page under the first account's Settings.
        const old = await withAgent(phone, '/app/sessions', 'PhoneBrowser/1.0')
        expect(old.statusCode).toBe(303)
        expect(old.headers.location).toBe(`/app/${accountId}/settings/sessions`)
        const page = await withAgent(phone, `/app/${accountId}/settings/sessions`, 'PhoneBrowser/1.0')
        expect(page.statusCode).toBe(200)
        expect(page.headers['cache-control']).toBe('no-store')
        expect(page.body).toContain('PhoneBrowser/1.0')
        expect(page.body).toContain('DesktopBrowser/2.0')
        const rows = [...page.body.matchAll(/<tr><td>([^<]*)<\/td>.*?<\/tr>/g)].map((m) => m[0])
        expect(rows).toHaveLength(2)
        expect(rows.find((r) => r.includes('PhoneBrowser'))).toContain('This session')
        expect(rows.find((r) => r.includes('DesktopBrowser'))).not.toContain('This session')
        // last seen is kept, at most once a minute per session
        const seen = await t.db.selectFrom('sessions').select(['last_seen_at', 'user_agent']).execute()
        expect(seen.map((s) => s.last_seen_at)).toContain(clock.now().toISOString())

        await phone.get(`/app/${accountId}/settings/sessions`)
        const out = await phone.post(`/app/${accountId}/settings/sessions/sign-out-others`, {})
        expect(out.statusCode).toBe(303)
        const first2 = await first.get(`/app/${accountId}/contacts`)
        expect(first2.statusCode).toBe(303)
        expect(first2.headers.location).toBe('/sign-in')
        expect((await phone.get(`/app/${accountId}/contacts`)).statusCode).toBe(200)
        const after = await phone.get(String(out.headers.location))
        expect(after.body).toContain('Every other session was signed out.')
        expect([...after.body.matchAll(/<tr><td>/g)]).toHaveLength(1)
      } finally {
        clock.advance(-2 * 60 * 1000)
      }
    })

    it('expired sessions are purged: the person’s own at sign-in, everyone’s by the hourly purge', async () => {
      await signUp(t.app, 'purge-a@example.com')
      await signUp(t.app, 'purge-b@example.com')
      const ids = async (email: string) =>
        (
          await t.db
            .selectFrom('sessions')
            .innerJoin('users', 'users.id', 'sessions.user_id')
            .select('sessions.token_hash')
            .where('users.email_lower', '=', email)
            .execute()
        ).length
      expect(await ids('purge-a@example.com')).toBe(1)
      clock.advance(SESSION_TTL_MS + 1000)
      try {
        await signIn('purge-a@example.com', 'Again/1')
        expect(await ids('purge-a@example.com')).toBe(1)
        expect(await ids('purge-b@example.com')).toBe(1)
        expect(await purgeExpiredSessions(t.db, clock.now())).toBeGreaterThanOrEqual(1)
        expect(await ids('purge-b@example.com')).toBe(0)
        expect(await ids('purge-a@example.com')).toBe(1)
      } finally {
        clock.advance(-(SESSION_TTL_MS + 1000))
      }
    })
  })

  describe('Settings', () => {
    it('the nav says Settings; it holds API & Webhooks, Members (owners) and sessions; /members redirects', async () => {
      const { client, accountId } = await signUp(t.app, 'settings@example.com')
      const page = await client.get(`/app/${accountId}/settings`)
      expect(page.statusCode).toBe(200)
      expect(page.body).toContain(`<a href="/app/${accountId}/settings" aria-current="page">Settings</a>`)
      expect(page.body).toContain(`href="/app/${accountId}/settings/api">API &amp; Webhooks</a>`)
      expect(page.body).toContain(`href="/app/${accountId}/settings/members">Members</a>`)
      expect(page.body).toContain(`href="/app/${accountId}/settings/sessions">Your sessions</a>`)
      // Each page of the section has the same tabs, the current one marked.
      for (const [path, tab] of [
        ['api', 'API &amp; Webhooks'],
        ['members', 'Members'],
        ['sessions', 'Your sessions'],
      ]) {
        const section = await client.get(`/app/${accountId}/settings/${path}`)
        expect(section.statusCode).toBe(200)
        expect(section.body).toContain(`<a href="/app/${accountId}/settings" aria-current="page">Settings</a>`)
        const tabs = /<nav class="tabs" aria-label="Settings">(.*?)<\/nav>/s.exec(section.body)?.[1] ?? ''
        expect(tabs).toContain(`<a href="/app/${accountId}/settings/${path}" aria-current="page">${tab}</a>`)
        expect(tabs.match(/aria-current/g)).toHaveLength(1)
        expect(tabs).toContain('Members')
      }
      const old = await client.get(`/app/${accountId}/members`)
      expect(old.statusCode).toBe(301)
      expect(old.headers.location).toBe(`/app/${accountId}/settings/members`)
    })
  })
})
