// Events: their schema and list query; every change to a resource is recorded in the same
// transaction as the change (outbox).
import { type Static, Type } from '@sinclair/typebox'
import { ApiKeySchema } from '../api-keys/api-key.schemas.js'
import { CONTACT_EXAMPLE, ContactSchema } from '../contacts/contacts.schemas.js'
import { sameSchemaAs } from '../http/openapi-components.js'
import { ListQuery, Livemode, PrefixedId, StringEnum, Timestamp } from '../http/schemas.js'
import { newId } from '../lib/ids.js'

export const CONTACT_EVENT_TYPES = ['contact.created', 'contact.updated', 'contact.deleted'] as const
export type ContactEventType = (typeof CONTACT_EVENT_TYPES)[number]
/** A key of the account was reported found in public (docs/key-safety.md#leaked-key-reports). */
export const KEY_EXPOSED = 'api_key.exposed'
export const EVENT_TYPES = [...CONTACT_EVENT_TYPES, KEY_EXPOSED] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const KEY_EXPOSED_TEXT =
  'A key of the account was reported found in public; `data.object` is the key (never its secret), `data.source_url` where it was found.'

/** What each contact event says; its webhook delivery (openapi-webhooks.ts) says the same. */
export const CONTACT_EVENT_TEXT: Record<ContactEventType, string> = {
  'contact.created': 'A contact was created; `data.object` is the contact as created.',
  'contact.updated': 'A contact was updated; `data.object` is the contact after the change.',
  'contact.deleted': 'A contact was deleted; `data.object` is the contact as it was.',
}

/** `contact.created` → `ContactCreatedEvent`: the component name of one event type's schema. */
const componentName = (type: string) =>
  `${type
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}Event`

/** An event of one contact.* type: `data.object` is the contact. */
const contactEvent = <T extends ContactEventType>(type: T) =>
  Type.Object(
    {
      object: Type.Literal('event'),
      id: PrefixedId('event'),
      type: Type.Literal(type),
      created_at: Timestamp,
      livemode: Livemode,
      data: Type.Object({ object: sameSchemaAs(ContactSchema) }, { additionalProperties: false }),
    },
    { $id: componentName(type), additionalProperties: false, description: CONTACT_EVENT_TEXT[type] },
  )

const keyExposedEvent = Type.Object(
  {
    object: Type.Literal('event'),
    id: PrefixedId('event'),
    type: Type.Literal(KEY_EXPOSED),
    created_at: Timestamp,
    livemode: Livemode,
    data: Type.Object(
      { object: ApiKeySchema, source_url: Type.String({ maxLength: 2048, description: 'Where the key was found.' }) },
      { additionalProperties: false },
    ),
  },
  { $id: componentName(KEY_EXPOSED), additionalProperties: false, description: KEY_EXPOSED_TEXT },
)

/** An event: one schema per type, told apart by `type` (a discriminated union). */
export const EventSchema = Type.Union([...CONTACT_EVENT_TYPES.map((type) => contactEvent(type)), keyExposedEvent], {
  $id: 'Event',
  examples: [
    {
      object: 'event',
      id: 'evt_01JD3Z8Q4R5S6T7V8W9X0Y1Z2C',
      type: 'contact.created',
      created_at: CONTACT_EXAMPLE.created_at,
      livemode: true,
      data: { object: CONTACT_EXAMPLE },
    },
  ],
  discriminator: {
    propertyName: 'type',
    mapping: Object.fromEntries(EVENT_TYPES.map((type) => [type, `#/components/schemas/${componentName(type)}`])),
  },
})
/** The longest a long poll waits, in seconds (docs/pagination.md#the-events-feed). */
export const WAIT_MAX_SECONDS = 30

/** GET /events: the paging parameters, an optional type, and where and how long to wait. */
export const ListEventsQuery = Type.Object(
  {
    ...ListQuery,
    type: Type.Optional(Type.Union(EVENT_TYPES.map((t) => Type.Literal(t)))),
    wait: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: 0,
        maximum: WAIT_MAX_SECONDS,
        description: `Seconds (0–${WAIT_MAX_SECONDS}) to wait for an event past the cursor when there is none yet; the page is answered as soon as one is committed.`,
      }),
    ),
    from: Type.Optional(
      StringEnum(['now'], {
        description: 'Starts at the end of the feed: only events committed from now on. Not with `after`.',
      }),
    ),
  },
  { additionalProperties: false },
)
export type ListEventsFilters = Omit<Static<typeof ListEventsQuery>, 'limit' | 'after' | 'wait' | 'from'>

/** A new event, written around a resource as stored: its body is `prefix`, the resource, `suffix`. */
export interface NewEvent {
  id: string
  type: EventType
  prefix: string
  suffix: string
}

/**
 * The one builder of events. The resource is spliced in as stored rather than serialized again
 * (the same bytes JSON.stringify of the whole event would give), so a write that has the resource
 * only in the database (a delete returning the row) can splice it there.
 */
export function newEvent(
  type: EventType,
  now: string,
  livemode: boolean,
  moreData: Readonly<Record<string, string>> = {},
): NewEvent {
  const id = newId('event')
  const prefix = `{"object":"event","id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"created_at":${JSON.stringify(now)},"livemode":${livemode},"data":{"object":`
  // Members of `data` after the object (an api_key.exposed event's source_url).
  const more = Object.entries(moreData).map(([name, value]) => `,${JSON.stringify(name)}:${JSON.stringify(value)}`)
  return { id, type, prefix, suffix: `${more.join('')}}}` }
}

export const eventBody = (event: NewEvent, objectBody: string): string => event.prefix + objectBody + event.suffix
