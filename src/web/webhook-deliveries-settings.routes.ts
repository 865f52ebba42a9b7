// One delivery of a webhook endpoint, under the endpoint's settings page: its request, every
// attempt and its response, and resending it. Registered by webhooks-settings.routes.ts, behind its role guard.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { toAttempt, toDelivery } from '../webhooks/deliveries.js'
import { findDelivery, findDeliveryBody, readAttempts } from '../webhooks/deliveries.store.js'
import { requireEndpoint, retryEndpointDelivery } from '../webhooks/endpoint-lifecycle.js'
import { toEndpoint } from '../webhooks/endpoints.js'
import { FormBody } from './forms.js'
import { NoticeQuery, noticeOf } from './notices.js'
import { deliveryPage } from './pages/webhooks-pages.js'
import type { Render } from './render.js'
import { accountContext, auditActorOf } from './request-context.js'

const NOTICES = new Map([['resent', 'One more attempt of this delivery is queued.']])
/** The latest attempts a delivery's page lists; the API lists every one. */
const ATTEMPTS_SHOWN = 50

const DeliveryParams = Type.Object({ accountId: Type.String(), endpointId: Type.String(), deliveryId: Type.String() })
const EmptyForm = FormBody([])

export const webhookDeliveriesSettingsRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps
  render: Render
}> = async (app, { deps, render }) => {
  const { db } = deps.database

  async function showDelivery(
    request: FastifyRequest,
    reply: FastifyReply,
    params: { endpointId: string; deliveryId: string },
    extra: { notice?: string; error?: string },
    status = 200,
  ) {
    const { tenant, home } = accountContext(request)
    const row = await requireEndpoint(db, tenant.id, params.endpointId)
    const delivery = await findDelivery(db, tenant.id, row.id, params.deliveryId)
    if (!delivery) {
      throw new AppError('not_found', 'No delivery with this id exists for this endpoint.')
    }
    const [body, attempts] = await Promise.all([
      findDeliveryBody(db, delivery),
      readAttempts(db, tenant.id, delivery.id, { limit: ATTEMPTS_SHOWN, newest: true }),
    ])
    const page = {
      home,
      endpoint: toEndpoint(row),
      delivery: toDelivery(delivery),
      attempts: attempts.map((attempt) => ({ number: attempt.attempt, ...toAttempt(attempt) })),
      body,
      ...extra,
    }
    return render(request, reply, (c) => deliveryPage(c, page), status)
  }

  app.get(
    '/settings/api/webhooks/:endpointId/deliveries/:deliveryId',
    { schema: { params: DeliveryParams, querystring: NoticeQuery }, attachValidation: true },
    async (request, reply) => {
      const notice = noticeOf(NOTICES, request.query?.notice)
      return showDelivery(request, reply, request.params, notice ? { notice } : {})
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/deliveries/:deliveryId/retry',
    { schema: { params: DeliveryParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const { endpointId, deliveryId } = request.params
      try {
        const now = deps.clock.now()
        await retryEndpointDelivery(deps.webhooks, tenant.id, endpointId, deliveryId, auditActorOf(request), now)
      } catch (error) {
        if (!(error instanceof AppError) || error.code === 'not_found') {
          throw error
        }
        return showDelivery(request, reply, request.params, { error: error.message }, 409)
      }
      const deliveryUrl = `${home}/settings/api/webhooks/${endpointId}/deliveries/${deliveryId}`
      return reply.redirect(`${deliveryUrl}?notice=resent`, 303)
    },
  )
}
