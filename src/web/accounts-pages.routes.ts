// /app: where a signed-in person lands, and creating a further account (its creator owns it).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ACCOUNT_NAME_MAX } from '../accounts/accounts.store.js'
import { assertMayOwnAnother } from '../accounts/owned-accounts.js'
import type { Deps } from '../deps.js'
import { createAccountForUser } from '../users/users.store.js'
import { FormBody, formValues } from './forms.js'
import { newAccountPage } from './pages/auth-pages.js'
import type { Render } from './render.js'
import { signedInContext } from './request-context.js'

const NEW_ACCOUNT_FIELDS = ['name'] as const
const NewAccountForm = FormBody(NEW_ACCOUNT_FIELDS)

export const accountsPagesRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock' | 'config'>
  render: Render
}> = async (app, { deps, render }) => {
  const { db } = deps.database

  app.get('/', async (request, reply) => {
    const first = signedInContext(request).memberships[0]
    return reply.redirect(first ? `/app/${first.account.id}/contacts` : '/app/accounts/new', 303)
  })

  app.get('/accounts/new', async (request, reply) => render(request, reply, (c) => newAccountPage(c, {})))

  app.post('/accounts', { schema: { body: NewAccountForm }, attachValidation: true }, async (request, reply) => {
    const values = formValues(request, NEW_ACCOUNT_FIELDS)
    const name = values.name.trim()
    if (name.length === 0 || name.length > ACCOUNT_NAME_MAX) {
      return render(
        request,
        reply,
        (c) => newAccountPage(c, values, { name: `Enter a name of 1 to ${ACCOUNT_NAME_MAX} characters.` }),
        400,
      )
    }
    const { user } = signedInContext(request)
    await assertMayOwnAnother(db, user.id, deps.config.maxAccountsPerPerson)
    const account = await createAccountForUser(db, user.id, name, deps.clock.now())
    return reply.redirect(`/app/${account.id}/contacts`, 303)
  })
}
