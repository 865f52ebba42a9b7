// The OpenAPI 3.1 `webhooks` section: for each event type, the POST a receiver gets, with the
// Standard Webhooks headers and its body (docs/design.md#webhooks).
import { type TSchema, Type } from '@sinclair/typebox'
import { ApiKeySchema } from '../api-keys/api-key.schemas.js'
import { ContactSchema } from '../contacts/contacts.schemas.js'
import { CONTACT_EVENT_TEXT, CONTACT_EVENT_TYPES, KEY_EXPOSED, KEY_EXPOSED_TEXT } from '../events/events.js'
import { PrefixedId, Timestamp } from '../http/schemas.js'
import { idLength } from '../lib/ids.js'
import { TEST_EVENT_TYPE } from './endpoints.js'

const ref = (name: string) => Type.Ref(`#/components/schemas/${name}`)

/** The body of a delivery of one event type, `object` being what `data.object` holds, `more` what follows it. */
const payloadSchema = (type: string, object: TSchema, description: string, more: Record<string, TSchema> = {}) =>
  Type.Object(
    {
      type: Type.Literal(type),
      timestamp: { ...Timestamp, description: 'When the event happened (its created_at).' },
      livemode: Type.Boolean({
        description: "The mode of the key's data the event is of: true live, false test (docs/test-mode.md).",
      }),
      data: Type.Object({ object, ...more }, { additionalProperties: false }),
    },
    { additionalProperties: false, description },
  )

const WEBHOOK_TEST_OBJECT = Type.Object(
  { object: Type.Literal('webhook_endpoint'), id: PrefixedId('webhookEndpoint') },
  { additionalProperties: false, description: 'The endpoint the test was sent to.' },
)

/** The component name of the body of each event type's delivery. */
const payloadName = (type: string) =>
  `${type
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}Payload`

/** Every event type a receiver can get, with its body's schema. */
const PAYLOADS: Array<{ type: string; schema: TSchema; description: string }> = [
  ...CONTACT_EVENT_TYPES.map((type) => ({
    type,
    description: CONTACT_EVENT_TEXT[type],
    schema: payloadSchema(type, ContactSchema, CONTACT_EVENT_TEXT[type]),
  })),
  {
    type: KEY_EXPOSED,
    description: KEY_EXPOSED_TEXT,
    schema: payloadSchema(KEY_EXPOSED, ApiKeySchema, KEY_EXPOSED_TEXT, {
      source_url: Type.String({ maxLength: 2048, description: 'Where the key was found.' }),
    }),
  },
  {
    type: TEST_EVENT_TYPE,
    description: 'Sent by POST /webhook_endpoints/{id}/test, whatever the endpoint subscribes to.',
    schema: payloadSchema(
      TEST_EVENT_TYPE,
      WEBHOOK_TEST_OBJECT,
      'A test event; `data.object` names the endpoint it was sent to.',
    ),
  },
]

/** A header every delivery carries (Standard Webhooks). */
const header = (name: string, schema: TSchema, description: string) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema,
})

const HEADERS = [
  header(
    'webhook-id',
    Type.String({ pattern: '^evt_', maxLength: idLength('event') }),
    'The event id: the same on every retry of a delivery, so a receiver can drop duplicates.',
  ),
  header(
    'webhook-timestamp',
    Type.String({ pattern: '^[0-9]{1,12}$', maxLength: 12 }),
    'When this attempt was signed, in seconds since the Unix epoch; reject it when far from now.',
  ),
  header(
    'webhook-signature',
    Type.String({ pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)?$', maxLength: 256 }),
    '`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` with the signing secret; two, space-separated, while a rolled secret still signs.',
  ),
]

/** The payloads' schemas (for components.schemas) and the `webhooks` section, one entry per event type. */
export function openApiWebhooks(): { schemas: Record<string, TSchema>; webhooks: Record<string, object> } {
  const schemas: Record<string, TSchema> = {}
  const webhooks: Record<string, object> = {}
  for (const { type, schema, description } of PAYLOADS) {
    const name = payloadName(type)
    schemas[name] = schema
    webhooks[type] = {
      post: {
        operationId: `webhook${name.replace(/Payload$/, '')}`,
        summary: `${type} event`,
        description: `${description} Answer with a 2xx within the timeout; anything else (a redirect too) is retried.`,
        tags: ['webhooks'],
        parameters: HEADERS,
        requestBody: { required: true, content: { 'application/json': { schema: ref(name) } } },
        responses: {
          '200': { description: 'Received (any 2xx will do).' },
          default: { description: 'Not received: the delivery is retried on its schedule.' },
        },
      },
    }
  }
  return { schemas, webhooks }
}
