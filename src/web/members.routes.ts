// Members of an account: the owner adds people who have signed up, by email.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { addMembership, findUserIdByEmail, listMembers } from '../users/users.store.js'
import { FormBody, formValues, UrlencodedValue } from './forms.js'
import { membersPage } from './pages/members-page.js'
import type { Page, Render } from './render.js'
import { AccountParams, accountContext } from './request-context.js'

const MembersQuery = Type.Object({ added: UrlencodedValue })
const ADD_MEMBER_FIELDS = ['email'] as const
const AddMemberForm = FormBody(ADD_MEMBER_FIELDS)

export const membersRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock'>
  render: Render
}> = async (app, { deps, render }) => {
  const { db } = deps.database

  const page = async (
    accountId: string,
    canAdd: boolean,
    form: { email?: string; error?: string; notice?: string } = {},
  ): Promise<Page> => {
    const members = await listMembers(db, accountId)
    return (context) => membersPage(context, { accountId, members, canAdd, ...form })
  }

  app.get(
    '/settings/members',
    { schema: { params: AccountParams, querystring: MembersQuery } },
    async (request, reply) => {
      const { account, role } = accountContext(request)
      const notice = request.query.added === '1' ? 'Member added.' : undefined
      return render(request, reply, await page(account.id, role === 'owner', { notice }))
    },
  )

  app.post(
    '/settings/members',
    { schema: { params: AccountParams, body: AddMemberForm }, attachValidation: true },
    async (request, reply) => {
      const { account, role } = accountContext(request)
      if (role !== 'owner') {
        return render(request, reply, await page(account.id, false, { error: 'Only owners can add members.' }), 403)
      }
      const { email } = formValues(request, ADD_MEMBER_FIELDS)
      const userId = await findUserIdByEmail(db, email)
      if (!userId) {
        return render(
          request,
          reply,
          await page(account.id, true, { email, error: 'No one has signed up with this email yet.' }),
          400,
        )
      }
      try {
        await addMembership(db, account.id, userId, 'member', deps.clock.now())
      } catch (error) {
        if (!isUniqueViolation(error)) {
          throw error
        }
        return render(
          request,
          reply,
          await page(account.id, true, { email, error: 'This person is already a member.' }),
          409,
        )
      }
      return reply.redirect(`/app/${account.id}/settings/members?added=1`, 303)
    },
  )
}
