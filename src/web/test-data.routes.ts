// Settings → API & Webhooks in test mode → "Delete all test data": owners and admins, confirmed,
// audited; the deletion itself runs in the background (src/accounts/test-data.ts).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { requestTestDataDeletion } from '../accounts/test-data.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { can } from '../users/roles.js'
import { FormBody } from './forms.js'
import { html } from './html.js'
import { confirmPage } from './pages/layout.js'
import type { Render } from './render.js'
import { accountContext, auditActorOf } from './request-context.js'

const DeleteForm = FormBody([])

export const testDataRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; render: Render }> = async (
  app,
  { deps, render },
) => {
  app.addHook('preHandler', async (request) => {
    if (!can(accountContext(request).role, 'test_data')) {
      throw new AppError('insufficient_scope', 'Only owners and admins of this account delete its test data.')
    }
  })

  app.get('/settings/test-data/delete', async (request, reply) => {
    const { home, account } = accountContext(request)
    return render(request, reply, (c) =>
      confirmPage(
        { ...c, section: 'api' },
        {
          title: 'Delete all test data',
          heading: html`Delete all test data of ${account.name}?`,
          body: html`<p>Every test-mode contact, event, webhook endpoint and delivery, import and stored
Idempotency-Key answer of this account is deleted. Test API keys stay, and so does everything in
live mode. The deletion runs in the background and cannot be undone.</p>`,
          action: `${home}/settings/test-data/delete`,
          button: 'Delete all test data',
          cancel: `${home}/settings/api`,
        },
      ),
    )
  })

  app.post('/settings/test-data/delete', { schema: { body: DeleteForm } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    await requestTestDataDeletion(deps.database.db, tenant, auditActorOf(request), deps.clock.now())
    deps.testData.wake()
    return reply.redirect(`${home}/settings/api?notice=test-data-deleting`, 303)
  })
}
