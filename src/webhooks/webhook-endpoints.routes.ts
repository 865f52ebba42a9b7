// /api/v1/webhook_endpoints (docs/design.md#webhooks): endpoints, their secret, test events and
// deliveries. The actions are endpoint-lifecycle.ts's, shared with the web app.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { type Static, Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Trx } from '../db/transaction.js'
import type { Deps } from '../deps.js'
import { authOf, requireFullAccess } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { BODY_OPTIONAL } from '../http/openapi-components.js'
import { apiProblems, emptyResponse, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { IdParams, ListQuery, NoQuery, PrefixedId, Timestamp } from '../http/schemas.js'
import { answerWithWrite, type IdempotentAnswer, sealAnswer, sendAnswer } from '../idempotency/idempotency.js'
import { ListDeliveriesQuery, toDelivery, WebhookAttemptSchema, WebhookDeliverySchema } from './deliveries.js'
import { type DeliveryRow, findDelivery, listAttemptRows, listDeliveryRows } from './deliveries.store.js'
import {
  changeEndpoint,
  createEndpoint,
  type EndpointWithSecret,
  type Recovery,
  recoverEndpointDeliveries,
  removeEndpoint,
  requireEndpoint,
  retryEndpointDelivery,
  rollSecret,
  sendTestEvent,
} from './endpoint-lifecycle.js'
import {
  CreateEndpointBody,
  PatchEndpointBody,
  ROLL_OVERLAP_DEFAULT_S,
  RollSecretBody,
  toEndpoint,
  WebhookEndpointSchema,
  WebhookEndpointWithSecretSchema,
} from './endpoints.js'
import { listEndpointRows } from './endpoints.store.js'

/** The problems of every request with a JSON body, and of a POST, which takes an Idempotency-Key. */
const BODY_PROBLEMS = ['payload_too_large', 'unsupported_media_type'] as const
const POST_PROBLEMS = ['idempotency_key_in_use', 'idempotency_key_reused', ...BODY_PROBLEMS] as const
/** The problems of the POSTs that queue one more delivery to an endpoint. */
const QUEUE_PROBLEMS = ['insufficient_scope', 'not_found', 'endpoint_disabled', ...POST_PROBLEMS] as const

/** Path parameters of one delivery: like IdParams, any string, so a malformed id is a 404. */
const DeliveryParams = Type.Object(
  { id: IdParams.properties.id, delivery_id: IdParams.properties.id },
  { additionalProperties: false },
)

const ListEndpointsQuery = Type.Object({ ...ListQuery }, { additionalProperties: false })
const ListAttemptsQuery = Type.Object({ ...ListQuery }, { additionalProperties: false })

const RecoverBody = Type.Object(
  {
    since: Type.String({
      format: 'date-time',
      maxLength: 40,
      description: 'RFC 3339: failed deliveries created at or after this time (not in the future).',
    }),
    until: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 40,
        description: 'RFC 3339: … and before this time, later than `since`. Default: now.',
      }),
    ),
  },
  { additionalProperties: false },
)

const RecoverySchema = Type.Object(
  {
    object: Type.Literal('webhook_recovery'),
    endpoint_id: PrefixedId('webhookEndpoint'),
    since: Timestamp,
    until: Timestamp,
    queued: Type.Integer({
      format: 'int32',
      minimum: 0,
      maximum: 2_147_483_647,
      description: 'How many failed deliveries were queued again.',
    }),
  },
  {
    $id: 'WebhookRecovery',
    additionalProperties: false,
    examples: [
      {
        object: 'webhook_recovery',
        endpoint_id: 'we_01JD3Z8Q4R5S6T7V8W9X0Y1Z2F',
        since: '2026-11-22T00:00:00.000Z',
        until: '2026-11-22T12:00:00.000Z',
        queued: 42,
      },
    ],
  },
)

/** The endpoint and, this once, its secret: the create and roll_secret answers. */
const withSecret = ({ endpoint, secret }: EndpointWithSecret): string =>
  JSON.stringify({ ...toEndpoint(endpoint), secret })

const json = (status: number, body: unknown): IdempotentAnswer => ({
  status,
  body: JSON.stringify(body),
  location: null,
})

/** Routes that take no input in their body: `{}` or none, and an unknown field is 400 as everywhere. */
const EmptyBody = Type.Object({}, { additionalProperties: false })

/** A body left out reads as `{}`: every field has its default. */
function bodyDefaultsToEmpty(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  request.body ??= {}
  done()
}

/** Runs a write and sends its answer, stored in the write's transaction when an Idempotency-Key came. */
async function answerWrite<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  answerOf: (result: T) => IdempotentAnswer,
  write: (within: ((trx: Trx, result: T) => Promise<void>) | undefined) => Promise<T>,
): Promise<FastifyReply> {
  const store = answerWithWrite(request)
  const result = await write(store && ((trx, written) => store(trx, answerOf(written))))
  return sendAnswer(reply, answerOf(result))
}

const queuedAnswer = (delivery: Parameters<typeof toDelivery>[0]): IdempotentAnswer => json(202, toDelivery(delivery))

export const webhookEndpointsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.database
  const now = () => deps.clock.now()
  // Full access even to read: a URL may carry a token and a delivery shows the receiver's answer
  // (docs/api-decisions.md#webhook-endpoints-need-full-access-even-to-read).
  requireFullAccess(app, 'Webhook endpoints')

  /** One of the account's endpoint's deliveries, or not_found (the endpoint's own, when it is missing). */
  async function requireDelivery(accountId: string, params: Static<typeof DeliveryParams>): Promise<DeliveryRow> {
    const endpointId = (await requireEndpoint(db, accountId, params.id)).id
    const delivery = await findDelivery(db, accountId, endpointId, params.delivery_id)
    if (!delivery) {
      throw new AppError('not_found', 'No delivery with this id exists for this endpoint.')
    }
    return delivery
  }

  app.get(
    '',
    {
      schema: {
        operationId: 'listWebhookEndpoints',
        summary: 'List webhook endpoints',
        description: 'One page at a time, in creation order; pass next_cursor back as `after`. Secrets are not shown.',
        querystring: ListEndpointsQuery,
        response: {
          200: jsonResponse(
            ListEnvelope('WebhookEndpointList', 'webhook_endpoints', WebhookEndpointSchema),
            'A page of webhook endpoints.',
          ),
          ...apiProblems('insufficient_scope', 'invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after } = request.query
      const accountId = authOf(request).tenant.id
      return sendPage(
        reply,
        deps.secret,
        { list: 'webhook_endpoints', accountId, filters: {} },
        { limit, after },
        (position) => listEndpointRows(db, accountId, position),
      )
    },
  )

  app.post(
    '',
    {
      schema: {
        operationId: 'createWebhookEndpoint',
        summary: 'Create a webhook endpoint',
        description:
          '201 with the endpoint, its `Location` and its signing secret (`secret`, shown in this response only). The URL must be https on a public address; `events` defaults to `["*"]`. At most 20 endpoints per account (403 `quota_exceeded`). With an `Idempotency-Key`, a retry replays the first response.',
        querystring: NoQuery,
        body: CreateEndpointBody,
        response: {
          201: jsonResponse(WebhookEndpointWithSecretSchema, 'The endpoint, created, with its signing secret.'),
          ...apiProblems('insufficient_scope', 'quota_exceeded', ...POST_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).tenant.id
      const answerOf = (created: EndpointWithSecret): IdempotentAnswer => ({
        status: 201,
        body: withSecret(created),
        location: `${deps.config.apiUrl}/api/v1/webhook_endpoints/${created.endpoint.id}`,
      })
      // The answer carries the signing secret: kept for replays, it is stored encrypted.
      sealAnswer(request)
      return answerWrite(request, reply, answerOf, (within) =>
        createEndpoint(deps.webhooks, accountId, request.body, undefined, now(), within),
      )
    },
  )

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getWebhookEndpoint',
        summary: 'Get a webhook endpoint',
        description: 'An endpoint of this account, without its secret; any other id, well-formed or not, is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: {
          200: jsonResponse(WebhookEndpointSchema, 'The endpoint.'),
          ...apiProblems('insufficient_scope', 'not_found'),
        },
      },
    },
    async (request, reply) => {
      const endpoint = await requireEndpoint(db, authOf(request).tenant.id, request.params.id)
      return sendAnswer(reply, json(200, toEndpoint(endpoint)))
    },
  )

  app.patch(
    '/:id',
    {
      schema: {
        operationId: 'updateWebhookEndpoint',
        summary: 'Update a webhook endpoint',
        description:
          'Changes url, description, events or status; an absent field is unchanged. Disabling sets `disabled_reason` to `manual` and ends pending deliveries as failed; enabling clears it.',
        params: IdParams,
        querystring: NoQuery,
        body: PatchEndpointBody,
        response: {
          200: jsonResponse(WebhookEndpointSchema, 'The endpoint, updated.'),
          ...apiProblems('insufficient_scope', 'not_found', ...BODY_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).tenant.id
      const row = await changeEndpoint(deps.webhooks, accountId, request.params.id, request.body, undefined, now())
      return sendAnswer(reply, json(200, toEndpoint(row)))
    },
  )

  app.delete(
    '/:id',
    {
      schema: {
        operationId: 'deleteWebhookEndpoint',
        summary: 'Delete a webhook endpoint',
        description: 'Deletes the endpoint and its deliveries; another id is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: { 204: emptyResponse('Deleted.'), ...apiProblems('insufficient_scope', 'not_found') },
      },
    },
    async (request, reply) => {
      await removeEndpoint(deps.webhooks, authOf(request).tenant.id, request.params.id, undefined, now())
      return reply.code(204).send(null)
    },
  )

  app.post(
    '/:id/roll_secret',
    {
      preValidation: bodyDefaultsToEmpty,
      schema: {
        [BODY_OPTIONAL]: true,
        operationId: 'rollWebhookEndpointSecret',
        summary: 'Roll the signing secret',
        description: `A new signing secret, in this response only. The old one keeps signing deliveries (a second signature) for \`expire_old_in_seconds\` (default ${ROLL_OVERLAP_DEFAULT_S}; 0 stops it now). The body may be empty.`,
        params: IdParams,
        querystring: NoQuery,
        body: RollSecretBody,
        response: {
          200: jsonResponse(WebhookEndpointWithSecretSchema, 'The endpoint with its new signing secret.'),
          ...apiProblems('insufficient_scope', 'not_found', ...POST_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const overlap = request.body.expire_old_in_seconds ?? ROLL_OVERLAP_DEFAULT_S
      const answerOf = (rolled: EndpointWithSecret): IdempotentAnswer => ({
        status: 200,
        body: withSecret(rolled),
        location: null,
      })
      sealAnswer(request)
      return answerWrite(request, reply, answerOf, (within) =>
        rollSecret(deps.webhooks, authOf(request).tenant.id, request.params.id, overlap, undefined, now(), within),
      )
    },
  )

  app.post(
    '/:id/test',
    {
      preValidation: bodyDefaultsToEmpty,
      schema: {
        [BODY_OPTIONAL]: true,
        operationId: 'testWebhookEndpoint',
        summary: 'Send a test event',
        description:
          '202: a `webhook.test` event is queued for this endpoint, whatever it subscribes to; the answer is its delivery. A disabled endpoint is 409 `endpoint_disabled`.',
        params: IdParams,
        querystring: NoQuery,
        body: EmptyBody,
        response: {
          202: jsonResponse(WebhookDeliverySchema, 'The delivery of the test event, queued.'),
          ...apiProblems(...QUEUE_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      return answerWrite(request, reply, queuedAnswer, (within) =>
        sendTestEvent(deps.webhooks, authOf(request).tenant.id, request.params.id, undefined, now(), within),
      )
    },
  )

  app.post(
    '/:id/recover',
    {
      schema: {
        operationId: 'recoverWebhookDeliveries',
        summary: 'Resend failed deliveries',
        description:
          '202: every `failed` delivery of this endpoint created in [`since`, `until`) is attempted once more, now; the answer says how many. A disabled endpoint is 409 `endpoint_disabled`; `since` in the future or `until` not after it is 400.',
        params: IdParams,
        querystring: NoQuery,
        body: RecoverBody,
        response: {
          202: jsonResponse(RecoverySchema, 'The failed deliveries of the range, queued again.'),
          ...apiProblems(...QUEUE_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const endpointId = request.params.id
      const answerOf = (recovery: Recovery): IdempotentAnswer =>
        json(202, { object: 'webhook_recovery', endpoint_id: endpointId, ...recovery })
      return answerWrite(request, reply, answerOf, (within) =>
        recoverEndpointDeliveries(
          deps.webhooks,
          authOf(request).tenant.id,
          endpointId,
          request.body,
          undefined,
          now(),
          within,
        ),
      )
    },
  )

  app.get(
    '/:id/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: "List an endpoint's deliveries",
        description: 'Newest first, optionally of one `status`; pass next_cursor back as `after`.',
        params: IdParams,
        querystring: ListDeliveriesQuery,
        response: {
          200: jsonResponse(
            ListEnvelope('WebhookDeliveryList', 'deliveries', WebhookDeliverySchema),
            'A page of deliveries.',
          ),
          ...apiProblems('insufficient_scope', 'invalid_cursor', 'not_found'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).tenant.id
      const endpointId = (await requireEndpoint(db, accountId, request.params.id)).id
      return sendPage(
        reply,
        deps.secret,
        // The endpoint is part of the query: a cursor from one endpoint's list is refused on another's.
        { list: 'deliveries', accountId, filters: { ...filters, endpoint_id: endpointId } },
        { limit, after },
        (position) => listDeliveryRows(db, accountId, endpointId, { ...filters, ...position }),
      )
    },
  )

  app.get(
    '/:id/deliveries/:delivery_id',
    {
      schema: {
        operationId: 'getWebhookDelivery',
        summary: 'Get a delivery',
        description: "One of this endpoint's deliveries; any other id is 404.",
        params: DeliveryParams,
        querystring: NoQuery,
        response: {
          200: jsonResponse(WebhookDeliverySchema, 'The delivery.'),
          ...apiProblems('insufficient_scope', 'not_found'),
        },
      },
    },
    async (request, reply) => {
      const delivery = await requireDelivery(authOf(request).tenant.id, request.params)
      return sendAnswer(reply, json(200, toDelivery(delivery)))
    },
  )

  app.get(
    '/:id/deliveries/:delivery_id/attempts',
    {
      schema: {
        operationId: 'listWebhookAttempts',
        summary: "List a delivery's attempts",
        description:
          "Every attempt of the delivery, oldest first: when, the receiver's status, how long it took, why it failed, and the start of its answer. Pass next_cursor back as `after`.",
        params: DeliveryParams,
        querystring: ListAttemptsQuery,
        response: {
          200: jsonResponse(
            ListEnvelope('WebhookAttemptList', 'attempts', WebhookAttemptSchema),
            'A page of attempts.',
          ),
          ...apiProblems('insufficient_scope', 'invalid_cursor', 'not_found'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after } = request.query
      const accountId = authOf(request).tenant.id
      const delivery = await requireDelivery(accountId, request.params)
      return sendPage(
        reply,
        deps.secret,
        { list: 'attempts', accountId, filters: { delivery_id: delivery.id } },
        { limit, after },
        (position) => listAttemptRows(db, accountId, delivery.id, position),
      )
    },
  )

  app.post(
    '/:id/deliveries/:delivery_id/retry',
    {
      preValidation: bodyDefaultsToEmpty,
      schema: {
        [BODY_OPTIONAL]: true,
        operationId: 'retryWebhookDelivery',
        summary: 'Retry a delivery',
        description:
          '202: one more attempt of this delivery, now (unless one is under way). A disabled endpoint is 409 `endpoint_disabled`.',
        params: DeliveryParams,
        querystring: NoQuery,
        body: EmptyBody,
        response: {
          202: jsonResponse(WebhookDeliverySchema, 'The delivery, due now.'),
          ...apiProblems(...QUEUE_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const { id, delivery_id: deliveryId } = request.params
      return answerWrite(request, reply, queuedAnswer, (within) =>
        retryEndpointDelivery(deps.webhooks, authOf(request).tenant.id, id, deliveryId, undefined, now(), within),
      )
    },
  )
}
