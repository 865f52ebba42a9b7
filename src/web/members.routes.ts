// Members of an account: the owner adds people who have signed up, by email.
import type { FastifyInstance } from 'fastify'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { addMembership, findUserByEmail, listMembers } from '../users/users.store.js'
import { html } from './html.js'
import { csrfInput, field, layout } from './pages/layout.js'
import { accountPage, formValues, type Render } from './web.routes.js'

export async function membersRoutes(
  app: FastifyInstance,
  { deps, render }: { deps: Deps; render: Render },
): Promise<void> {
  const { db } = deps.database

  const page = async (
    accountId: string,
    isOwner: boolean,
    values: { email?: string },
    error?: string,
    notice?: string,
  ) => {
    const members = await listMembers(db, accountId)
    return (context: Parameters<Parameters<Render>[2]>[0]) =>
      layout(
        'Members',
        { ...context, section: 'members' },
        html`<h1>Members</h1>
${notice ? html`<div class="alert ok" role="status">${notice}</div>` : ''}
<div class="table-wrap"><table><thead><tr><th>Email</th><th>Role</th><th>Since</th></tr></thead><tbody>
${members.map((m) => html`<tr><td>${m.email}</td><td>${m.role}</td><td>${m.created_at.slice(0, 10)}</td></tr>`)}
</tbody></table></div>
${
  isOwner
    ? html`<h2>Add a member</h2><div class="card"><form method="post" action="/app/${accountId}/settings/members" novalidate>${csrfInput(context.csrf)}
${field({ name: 'email', label: 'Email of a person who has signed up', type: 'email', value: values.email, error, required: true })}
<p><button type="submit">Add member</button></p></form></div>`
    : html`<p class="hint">Only owners can add members.</p>`
}`,
      )
  }

  app.get('/settings/members', async (request, reply) => {
    const { account, role } = accountPage(request)
    const notice = (request.query as { added?: string }).added === '1' ? 'Member added.' : undefined
    return render(request, reply, await page(account.id, role === 'owner', {}, undefined, notice))
  })

  app.post('/settings/members', async (request, reply) => {
    const { account, role } = accountPage(request)
    if (role !== 'owner') {
      return render(request, reply, await page(account.id, false, {}, 'Only owners can add members.'), 403)
    }
    const { email } = formValues(request, ['email'])
    const user = await findUserByEmail(db, email)
    if (!user) {
      return render(
        request,
        reply,
        await page(account.id, true, { email }, 'No one has signed up with this email yet.'),
        400,
      )
    }
    try {
      await addMembership(db, account.id, user.id, 'member', deps.clock.now())
    } catch (error) {
      if (!isUniqueViolation(error)) {
        throw error
      }
      return render(request, reply, await page(account.id, true, { email }, 'This person is already a member.'), 409)
    }
    return reply.redirect(`/app/${account.id}/settings/members?added=1`, 303)
  })
}
