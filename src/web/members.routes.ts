// Settings, and Settings → Members: only owners see and change members (invitations, roles,
// removal). The invite form answers alike whether or not the email has signed up (docs/web-app.md).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { listActiveKeysCreatedBy } from '../api-keys/api-keys.store.js'
import { endKeysOfRemovedPerson, warnIfNotPushed } from '../api-keys/key-lifecycle.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import {
  createInvitation,
  INVITATIONS_PER_HOUR,
  invitationRetryAfter,
  listPendingInvitations,
  revokeInvitation,
  revokeInvitationsOf,
} from '../invitations/invitations.store.js'
import { emailKey, normalizeEmail } from '../lib/email.js'
import { clientKey } from '../rate-limit/client-key.js'
import { can, isRole } from '../users/roles.js'
import { changeMembership, findUser, listMembers } from '../users/users.store.js'
import { FormBody, formList, formValues } from './forms.js'
import { NoticeQuery, noticeOf } from './notices.js'
import { invitationCreatedPage, membersPage, removeMemberConfirmPage } from './pages/members-page.js'
import { settingsPage } from './pages/settings-pages.js'
import { requirePermission } from './permissions.js'
import type { Page, Render } from './render.js'
import { accountContext, auditActorOf } from './request-context.js'
import { createSecretOnce } from './secret-once.js'
import type { CookieOptions } from './session.js'

const NOTICES = new Map([
  ['revoked', 'The invitation was revoked: its link no longer works.'],
  ['role', 'The role was changed.'],
  ['removed', 'The member was removed.'],
  ['link-shown', 'An invitation link is shown only once. If it was lost, invite the same email again.'],
  ['last-owner', 'An account keeps at least one owner: make someone else owner first.'],
])

const MemberParams = Type.Object({ userId: Type.String({ maxLength: 100 }) })
const InvitationParams = Type.Object({ invitationId: Type.String({ maxLength: 100 }) })
const INVITE_FIELDS = ['email', 'role'] as const
const InviteForm = FormBody(INVITE_FIELDS)
const ROLE_FIELDS = ['role'] as const
const RoleForm = FormBody(ROLE_FIELDS)
const EmptyForm = FormBody([])
const RemoveForm = FormBody(['keep'])

export const membersRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock' | 'config' | 'secret' | 'keyRevocations'>
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  app.get('/settings', async (request, reply) => {
    const { account, role } = accountContext(request)
    return render(request, reply, (c) =>
      settingsPage(c, { accountId: account.id, canManageMembers: can(role, 'members') }),
    )
  })

  // Members had no Settings section before; its old address still leads there.
  app.get('/members', async (request, reply) =>
    reply.redirect(`/app/${accountContext(request).account.id}/settings/members`, 301),
  )

  await app.register(async (owners) => {
    owners.addHook(
      'preHandler',
      requirePermission(render, 'members', 'Only owners of this account see and change its members.'),
    )
    await owners.register(ownerRoutes, { deps, render, cookieOptions })
  })
}

const ownerRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock' | 'config' | 'secret' | 'keyRevocations'>
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  const { db } = deps.database
  const base = (accountId: string) => `/app/${accountId}/settings/members`
  const createdPath = (accountId: string, id: string) => `${base(accountId)}/invitations/${id}/created`
  // The link is a secret: shown once, on the page the POST redirects to (like a new API key).
  const linkOnce = createSecretOnce(deps.secret, cookieOptions)

  const page = async (
    accountId: string,
    userId: string,
    form: { email?: string; role?: string; error?: string; notice?: string } = {},
  ): Promise<Page> => {
    const now = deps.clock.now()
    const [members, invitations] = await Promise.all([
      listMembers(db, accountId),
      listPendingInvitations(db, accountId, now),
    ])
    return (context) => membersPage(context, { accountId, userId, members, invitations, ...form })
  }

  async function findMemberOr404(accountId: string, userId: string) {
    const member = (await listMembers(db, accountId)).find((m) => m.id === userId)
    if (!member) {
      throw new AppError('not_found', 'No such member in this account.')
    }
    return member
  }

  app.get(
    '/settings/members',
    { schema: { querystring: NoticeQuery }, attachValidation: true },
    async (request, reply) => {
      const { account, user } = accountContext(request)
      const notice = noticeOf(NOTICES, request.query.notice)
      return render(request, reply, await page(account.id, user.id, notice ? { notice } : {}))
    },
  )

  app.post('/settings/members', { schema: { body: InviteForm }, attachValidation: true }, async (request, reply) => {
    const { account, user } = accountContext(request)
    const values = formValues(request, INVITE_FIELDS)
    const email = normalizeEmail(values.email)
    const role = values.role
    if (!email || (role !== 'admin' && role !== 'member')) {
      const error = email ? 'Choose the role from the list.' : 'Enter an email address, like name@example.com.'
      return render(request, reply, await page(account.id, user.id, { ...values, error }), 400)
    }
    // Already in this account (the list above shows it anyway): say so, rather than make a link that
    // would change nothing; a role is changed in the list.
    const members = await listMembers(db, account.id)
    if (members.some((member) => emailKey(member.email) === emailKey(email))) {
      const error = `${email} is already a member of this account; change their role in the list above.`
      return render(request, reply, await page(account.id, user.id, { ...values, error }), 409)
    }
    const now = deps.clock.now()
    const client = clientKey(request.ip)
    const wait = await invitationRetryAfter(db, account.id, client, now)
    if (wait > 0) {
      throw new AppError(
        'rate_limited',
        `At most ${INVITATIONS_PER_HOUR} invitations an hour may be sent from this account or this address; try again in ${Math.ceil(wait / 60)} min.`,
        { headers: { 'retry-after': String(wait) } },
      )
    }
    const { invitation, token } = await createInvitation(db, account.id, {
      email,
      role,
      invitedBy: user.id,
      clientKey: client,
      now,
    })
    const target = createdPath(account.id, invitation.id)
    linkOnce.put(request, reply, target, invitation.id, `${deps.config.appUrl}/invitations/${token}`, now)
    return reply.redirect(target, 303)
  })

  app.get(
    '/settings/members/invitations/:invitationId/created',
    { schema: { params: InvitationParams }, attachValidation: true },
    async (request, reply) => {
      const { account } = accountContext(request)
      const now = deps.clock.now()
      const invitation = (await listPendingInvitations(db, account.id, now)).find(
        (i) => i.id === request.params.invitationId,
      )
      const link =
        invitation && linkOnce.take(request, reply, createdPath(account.id, invitation.id), invitation.id, now)
      if (!invitation || link === undefined) {
        return reply.redirect(`${base(account.id)}?notice=link-shown`, 303)
      }
      return render(request, reply, (c) => invitationCreatedPage(c, { accountId: account.id, invitation, link }))
    },
  )

  app.post(
    '/settings/members/invitations/:invitationId/revoke',
    { schema: { params: InvitationParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { account } = accountContext(request)
      if (!(await revokeInvitation(db, account.id, request.params.invitationId, deps.clock.now()))) {
        throw new AppError('not_found', 'No pending invitation of that id.')
      }
      return reply.redirect(`${base(account.id)}?notice=revoked`, 303)
    },
  )

  app.post(
    '/settings/members/:userId/role',
    { schema: { params: MemberParams, body: RoleForm }, attachValidation: true },
    async (request, reply) => {
      const { account, user } = accountContext(request)
      const { role } = formValues(request, ROLE_FIELDS)
      if (!isRole(role)) {
        return render(request, reply, await page(account.id, user.id, { error: 'Choose the role from the list.' }), 400)
      }
      const result = await changeMembership(db, account.id, request.params.userId, role)
      if (!result.ok) {
        if (result.code === 'not_found') {
          throw new AppError('not_found', 'No such member in this account.')
        }
        return render(request, reply, await page(account.id, user.id, { notice: NOTICES.get('last-owner') }), 409)
      }
      // An owner who made themselves admin or member can no longer see this page.
      const self = request.params.userId === user.id && role !== 'owner'
      return reply.redirect(self ? `/app/${account.id}/settings` : `${base(account.id)}?notice=role`, 303)
    },
  )

  app.get(
    '/settings/members/:userId/remove',
    { schema: { params: MemberParams }, attachValidation: true },
    async (request, reply) => {
      const { account, user } = accountContext(request)
      const member = await findMemberOr404(account.id, request.params.userId)
      const keys = await listActiveKeysCreatedBy(db, account.id, member.id, deps.config.keyPrefix, deps.clock.now())
      return render(request, reply, (c) =>
        removeMemberConfirmPage(c, {
          accountId: account.id,
          member,
          self: member.id === user.id,
          keys: keys.map((key) => key.apiKey),
        }),
      )
    },
  )

  // The keys are listed again in the removal's transaction: one created since the confirmation
  // was shown is revoked too, since only the keys named in `keep` are kept.
  app.post(
    '/settings/members/:userId/remove',
    { schema: { params: MemberParams, body: RemoveForm }, attachValidation: true },
    async (request, reply) => {
      const { account, user } = accountContext(request)
      const { userId } = request.params
      const removed = await findUser(db, userId)
      const keep = new Set(formList(request.body, 'keep'))
      const now = deps.clock.now()
      let revoked: Awaited<ReturnType<typeof endKeysOfRemovedPerson>> = []
      const result = await changeMembership(db, account.id, userId, null, async (trx, onCommit) => {
        const removal = { accountId: account.id, userId, keep }
        revoked = await endKeysOfRemovedPerson(trx, onCommit, deps, removal, auditActorOf(request), now)
        // A link sent to them before, not yet used, would bring them straight back.
        if (removed) {
          await revokeInvitationsOf(trx, account.id, removed.email, now)
        }
      })
      if (!result.ok) {
        if (result.code === 'not_found') {
          throw new AppError('not_found', 'No such member in this account.')
        }
        return render(request, reply, await page(account.id, user.id, { notice: NOTICES.get('last-owner') }), 409)
      }
      for (const { keyId, push } of revoked) {
        warnIfNotPushed(request.log, keyId, push.sent)
      }
      return reply.redirect(userId === user.id ? '/app' : `${base(account.id)}?notice=removed`, 303)
    },
  )
}
