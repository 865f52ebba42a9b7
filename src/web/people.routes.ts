// What belongs to a person rather than to one account: the page an invitation link opens (signed out
// too, to say to sign in first), and the person's sessions.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Deps } from '../deps.js'
import { acceptInvitation, findPendingInvitation } from '../invitations/invitations.store.js'
import { emailKey } from '../lib/email.js'
import { deleteOtherSessions, listSessions } from '../users/sessions.store.js'
import { FormBody } from './forms.js'
import { errorPage } from './pages/layout.js'
import { invitationPage, invitationRefusedPage, sessionsPage } from './pages/settings-pages.js'
import type { Render } from './render.js'
import { accountContext, requireSignIn, sessionUser, signedInContext } from './request-context.js'
import { SESSION_COOKIE } from './session.js'

// The token is 32 random bytes in base64url; anything else is no link of ours.
const InvitationParams = Type.Object({ token: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }) })
const SessionsQuery = Type.Object({ notice: Type.Optional(Type.String()) })
const EmptyForm = FormBody([])

const NOT_VALID = 'This invitation link is not valid: it was used, revoked, or has expired. Ask for a new one.'

export const peopleRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock'>
  render: Render
}> = async (app, { deps, render }) => {
  const { db } = deps.database
  const notValid = (request: FastifyRequest, reply: FastifyReply) =>
    render(request, reply, (c) => errorPage(404, 'Invitation not valid', NOT_VALID, c), 404)

  app.get('/invitations/:token', { schema: { params: InvitationParams } }, async (request, reply) => {
    const { token } = request.params
    const invitation = await findPendingInvitation(db, token, deps.clock.now())
    if (!invitation) {
      return notValid(request, reply)
    }
    const user = sessionUser(request)
    if (user && emailKey(user.email) !== emailKey(invitation.email)) {
      return render(
        request,
        reply,
        (c) => invitationRefusedPage(c, { invitedEmail: invitation.email, signedInAs: user.email }),
        403,
      )
    }
    return render(request, reply, (c) =>
      invitationPage(c, { token, invitation, ...(user ? { signedInAs: user.email } : {}) }),
    )
  })

  app.post(
    '/invitations/:token/accept',
    { schema: { params: InvitationParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const user = sessionUser(request)
      if (!user) {
        return reply.redirect(`/invitations/${request.params.token}`, 303)
      }
      const result = await acceptInvitation(db, request.params.token, user, deps.clock.now())
      if (result.ok || result.code === 'already_member') {
        return reply.redirect(`/app/${result.accountId}/contacts`, 303)
      }
      if (result.code === 'invitation_wrong_email') {
        return render(
          request,
          reply,
          (c) => invitationRefusedPage(c, { invitedEmail: result.invitedEmail, signedInAs: user.email }),
          403,
        )
      }
      return notValid(request, reply)
    },
  )

  await app.register(sessionsRoutes, { deps, render })
}

/** /app/sessions, the sessions page's address before it moved under each account's Settings. */
const sessionsRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock'>
  render: Render
}> = async (app, { deps }) => {
  requireSignIn(app, deps.database.db)
  app.get('/app/sessions', async (request, reply) => {
    const first = signedInContext(request).memberships[0]
    return reply.redirect(first ? `/app/${first.account.id}/settings/sessions` : '/app', 303)
  })
}

/** Settings → Your sessions, shown inside the account the person came from, with its header and tabs. */
export const accountSessionsRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock'>
  render: Render
}> = async (app, { deps, render }) => {
  const { db } = deps.database

  app.get('/settings/sessions', { schema: { querystring: SessionsQuery } }, async (request, reply) => {
    const { user, account } = accountContext(request)
    const token = request.cookies[SESSION_COOKIE] ?? ''
    const sessions = await listSessions(db, user.id, token, deps.clock.now())
    const notice = request.query.notice === 'signed-out' ? 'Every other session was signed out.' : undefined
    const signOutOthers = `/app/${account.id}/settings/sessions/sign-out-others`
    return render(request, reply, (c) => sessionsPage(c, { sessions, signOutOthers, ...(notice ? { notice } : {}) }))
  })

  app.post(
    '/settings/sessions/sign-out-others',
    { schema: { body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { user, account } = accountContext(request)
      await deleteOtherSessions(db, user.id, request.cookies[SESSION_COOKIE] ?? '')
      return reply.redirect(`/app/${account.id}/settings/sessions?notice=signed-out`, 303)
    },
  )
}
