// Webhook deliveries as the API shows them: one per event and endpoint, with its last attempt.
import { type Static, Type } from '@sinclair/typebox'
import { tenantById } from '../accounts/tenant.js'
import { EVENT_TYPES } from '../events/events.js'
import { ListQuery, Livemode, Nullable, PrefixedId, StringEnum, Timestamp } from '../http/schemas.js'
import { TEST_EVENT_TYPE } from './endpoints.js'
import type { WebhookAttemptsTable, WebhookDeliveriesTable } from './webhooks.table.js'

export const DELIVERY_STATUSES = ['pending', 'retrying', 'succeeded', 'failed'] as const
const DeliveryStatusSchema = Type.Union(
  DELIVERY_STATUSES.map((s) => Type.Literal(s)),
  {
    description:
      'pending: not yet attempted; retrying: failed, next_attempt_at set; succeeded; failed: retries exhausted or endpoint disabled.',
  },
)

/** One attempt's outcome: a delivery's `last_attempt`, and each item of its attempts list. */
const AttemptFields = {
  at: Timestamp,
  status_code: Nullable(
    Type.Integer({
      format: 'int32',
      minimum: 100,
      maximum: 999,
      description: "The receiver's HTTP status; null when none came.",
    }),
  ),
  duration_ms: Type.Integer({ format: 'int32', minimum: 0, maximum: 2_147_483_647 }),
  error: Nullable(
    Type.String({
      maxLength: 256,
      description: 'Why it failed when the status does not say: timeout, connection refused, …',
    }),
  ),
  response_excerpt: Type.String({
    maxLength: 1024,
    description: 'At most the first 1 KB of the response body.',
  }),
}

export const WebhookAttemptSchema = Type.Object(
  { object: Type.Literal('webhook_attempt'), ...AttemptFields },
  {
    $id: 'WebhookAttempt',
    additionalProperties: false,
    examples: [
      {
        object: 'webhook_attempt',
        at: '2026-11-22T10:00:01.000Z',
        status_code: 503,
        duration_ms: 31,
        error: null,
        response_excerpt: 'upstream unavailable',
      },
    ],
  },
)
export type WebhookAttempt = Static<typeof WebhookAttemptSchema>

export const WebhookDeliverySchema = Type.Object(
  {
    object: Type.Literal('webhook_delivery'),
    id: PrefixedId('webhookDelivery'),
    endpoint_id: PrefixedId('webhookEndpoint'),
    event_id: PrefixedId('event'),
    event_type: Type.Union([...EVENT_TYPES, TEST_EVENT_TYPE].map((t) => Type.Literal(t))),
    status: DeliveryStatusSchema,
    attempts: Type.Integer({ format: 'int32', minimum: 0, maximum: 2_147_483_647 }),
    next_attempt_at: Nullable(Timestamp),
    last_attempt: Nullable(Type.Object(AttemptFields, { additionalProperties: false })),
    created_at: Timestamp,
    livemode: Livemode,
  },
  {
    $id: 'WebhookDelivery',
    additionalProperties: false,
    examples: [
      {
        object: 'webhook_delivery',
        id: 'wd_01JD3Z8Q4R5S6T7V8W9X0Y1Z2G',
        endpoint_id: 'we_01JD3Z8Q4R5S6T7V8W9X0Y1Z2F',
        event_id: 'evt_01JD3Z8Q4R5S6T7V8W9X0Y1Z2C',
        event_type: 'contact.created',
        status: 'succeeded',
        attempts: 1,
        next_attempt_at: null,
        last_attempt: {
          at: '2026-11-22T10:00:01.000Z',
          status_code: 200,
          duration_ms: 12,
          error: null,
          response_excerpt: 'ok',
        },
        created_at: '2026-11-22T10:00:00.000Z',
        livemode: true,
      },
    ],
  },
)
export type WebhookDelivery = Static<typeof WebhookDeliverySchema>

export const ListDeliveriesQuery = Type.Object(
  { ...ListQuery, status: Type.Optional(StringEnum(DELIVERY_STATUSES)) },
  { additionalProperties: false },
)
export type ListDeliveriesFilters = Omit<Static<typeof ListDeliveriesQuery>, 'limit' | 'after'>

/** The API representation of a stored delivery. */
export function toDelivery(row: WebhookDeliveriesTable): WebhookDelivery {
  return {
    object: 'webhook_delivery',
    id: row.id,
    endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    event_type: row.event_type as WebhookDelivery['event_type'],
    status: row.status,
    attempts: row.attempts,
    // While an attempt is under way: when it is made again if this one never reports (its lease).
    next_attempt_at: row.next_attempt_at,
    last_attempt:
      row.last_attempt_at === null
        ? null
        : {
            at: row.last_attempt_at,
            status_code: row.last_status_code,
            duration_ms: row.last_duration_ms ?? 0,
            error: row.last_error,
            response_excerpt: row.last_response_excerpt ?? '',
          },
    created_at: row.created_at,
    livemode: tenantById(row.account_id).livemode,
  }
}

/** The API representation of a stored attempt. */
export const toAttempt = (row: WebhookAttemptsTable): WebhookAttempt => ({
  object: 'webhook_attempt',
  at: row.at,
  status_code: row.status_code,
  duration_ms: row.duration_ms,
  error: row.error,
  response_excerpt: row.response_excerpt,
})
