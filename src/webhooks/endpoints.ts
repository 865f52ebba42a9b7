// Webhook endpoints as the API shows them: the resource, its create and patch bodies, and what an
// endpoint can subscribe to.
import { type Static, Type } from '@sinclair/typebox'
import { tenantById } from '../accounts/tenant.js'
import { EVENT_TYPES } from '../events/events.js'
import { Livemode, Nullable, PrefixedId, StringEnum, Timestamp } from '../http/schemas.js'
import type { WebhookEndpointsTable } from './webhooks.table.js'

/** At most this many endpoints per account (403 quota_exceeded beyond). */
export const ENDPOINTS_PER_ACCOUNT_MAX = 20
export const ENDPOINT_URL_MAX = 2048
export const ENDPOINT_DESCRIPTION_MAX = 256
/** roll_secret's overlap: until then deliveries carry both signatures. */
export const ROLL_OVERLAP_MAX_S = 604_800
export const ROLL_OVERLAP_DEFAULT_S = 86_400

/** The type of the event POST /webhook_endpoints/{id}/test sends: never in the feed, never subscribable. */
export const TEST_EVENT_TYPE = 'webhook.test'

type Subscribable = (typeof EVENT_TYPES)[number] | '*'
const SubscribableType = StringEnum<readonly Subscribable[]>(['*', ...EVENT_TYPES])
export const EndpointEvents = Type.Array(SubscribableType, {
  minItems: 1,
  maxItems: EVENT_TYPES.length,
  uniqueItems: true,
  description: 'The event types sent to this endpoint, or ["*"] (alone) for all.',
})
export type EndpointEvents = Static<typeof EndpointEvents>

export const WebhookEndpointSchema = Type.Object(
  {
    object: Type.Literal('webhook_endpoint'),
    id: PrefixedId('webhookEndpoint'),
    url: Type.String({ format: 'uri', maxLength: ENDPOINT_URL_MAX }),
    description: Nullable(Type.String({ maxLength: ENDPOINT_DESCRIPTION_MAX })),
    events: EndpointEvents,
    status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
    disabled_reason: Nullable(
      Type.Union([Type.Literal('manual'), Type.Literal('failing'), Type.Literal('gone')], {
        description:
          'manual: disabled by PATCH; failing: 5 days of failed deliveries; gone: the receiver answered 410.',
      }),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
    livemode: Livemode,
  },
  {
    $id: 'WebhookEndpoint',
    additionalProperties: false,
    examples: [
      {
        object: 'webhook_endpoint',
        id: 'we_01JD3Z8Q4R5S6T7V8W9X0Y1Z2F',
        url: 'https://example.com/hooks',
        description: 'CRM sync',
        events: ['contact.created', 'contact.updated'],
        status: 'enabled',
        disabled_reason: null,
        created_at: '2026-11-22T10:00:00.000Z',
        updated_at: '2026-11-22T10:00:00.000Z',
        livemode: true,
      },
    ],
  },
)
export type WebhookEndpoint = Static<typeof WebhookEndpointSchema>

/** The create and roll_secret responses: the endpoint and, this once, its signing secret. */
export const WebhookEndpointWithSecretSchema = Type.Object(
  {
    ...WebhookEndpointSchema.properties,
    secret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
      minLength: 50,
      maxLength: 50,
      description: 'The signing secret. Shown in this response only.',
    }),
  },
  { $id: 'WebhookEndpointWithSecret', additionalProperties: false },
)

const Url = Type.String({ minLength: 1, maxLength: ENDPOINT_URL_MAX, description: 'An https URL on a public address.' })
const Description = Nullable(Type.String({ maxLength: ENDPOINT_DESCRIPTION_MAX }))

export const CreateEndpointBody = Type.Object(
  {
    url: Url,
    description: Type.Optional(Description),
    events: Type.Optional(EndpointEvents),
  },
  { $id: 'WebhookEndpointCreateInput', additionalProperties: false },
)
export type CreateEndpointInput = Static<typeof CreateEndpointBody>

export const PatchEndpointBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Description),
    events: Type.Optional(EndpointEvents),
    status: Type.Optional(StringEnum(['enabled', 'disabled'])),
  },
  { $id: 'WebhookEndpointUpdateInput', additionalProperties: false },
)
export type PatchEndpointInput = Static<typeof PatchEndpointBody>

export const RollSecretBody = Type.Object(
  {
    expire_old_in_seconds: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: 0,
        maximum: ROLL_OVERLAP_MAX_S,
        default: ROLL_OVERLAP_DEFAULT_S,
        description: 'How long the old secret still signs deliveries (0: not at all).',
      }),
    ),
  },
  { $id: 'WebhookEndpointRollSecretInput', additionalProperties: false },
)

/** The API representation of a stored endpoint. */
export function toEndpoint(row: WebhookEndpointsTable): WebhookEndpoint {
  return {
    object: 'webhook_endpoint',
    id: row.id,
    url: row.url,
    description: row.description,
    events: JSON.parse(row.events) as EndpointEvents,
    status: row.status,
    disabled_reason: row.disabled_reason,
    created_at: row.created_at,
    updated_at: row.updated_at,
    livemode: tenantById(row.account_id).livemode,
  }
}

/** The rule the schema cannot state: `*` stands alone. Returns the problem, or undefined. */
export function eventsProblem(events: readonly string[] | undefined): string | undefined {
  return events?.includes('*') && events.length > 1 ? 'must be ["*"] alone or a list of event types' : undefined
}

/** Whether an endpoint subscribed with `events` receives an event of `type`. */
export function subscribes(events: readonly string[], type: string): boolean {
  return events.includes('*') || events.includes(type)
}
