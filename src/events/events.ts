// Events: their schema and list query; every change to a resource is recorded in the same
// transaction as the change (outbox).
import { type Static, Type } from '@sinclair/typebox'
import { CONTACT_EXAMPLE, ContactSchema } from '../contacts/contacts.schemas.js'
import type { Trx } from '../db/transaction.js'
import { sameSchemaAs } from '../http/openapi-components.js'
import { ListQuery, PrefixedId, Timestamp } from '../http/schemas.js'
import { newId } from '../lib/ids.js'
import { newEventPosition } from './feed-position.js'

export const EVENT_TYPES = ['contact.created', 'contact.updated', 'contact.deleted'] as const
export type EventType = (typeof EVENT_TYPES)[number]

/** What each contact event says; its webhook delivery (openapi-webhooks.ts) says the same. */
export const CONTACT_EVENT_TEXT: Record<EventType, string> = {
  'contact.created': 'A contact was created; `data.object` is the contact as created.',
  'contact.updated': 'A contact was updated; `data.object` is the contact after the change.',
  'contact.deleted': 'A contact was deleted; `data.object` is the contact as it was.',
}

/** `contact.created` → `ContactCreatedEvent`: the component name of one event type's schema. */
const componentName = (type: string) =>
  `${type
    .split('.')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}Event`

/** An event of one contact.* type: `data.object` is the contact. */
const contactEvent = <T extends EventType>(type: T) =>
  Type.Object(
    {
      object: Type.Literal('event'),
      id: PrefixedId('event'),
      type: Type.Literal(type),
      created_at: Timestamp,
      data: Type.Object({ object: sameSchemaAs(ContactSchema) }, { additionalProperties: false }),
    },
    { $id: componentName(type), additionalProperties: false, description: CONTACT_EVENT_TEXT[type] },
  )

/** An event: one schema per type, told apart by `type` (a discriminated union). */
export const EventSchema = Type.Union(
  EVENT_TYPES.map((type) => contactEvent(type)),
  {
    $id: 'Event',
    examples: [
      {
        object: 'event',
        id: 'evt_01JD3Z8Q4R5S6T7V8W9X0Y1Z2C',
        type: 'contact.created',
        created_at: CONTACT_EXAMPLE.created_at,
        data: { object: CONTACT_EXAMPLE },
      },
    ],
    discriminator: {
      propertyName: 'type',
      mapping: Object.fromEntries(EVENT_TYPES.map((type) => [type, `#/components/schemas/${componentName(type)}`])),
    },
  },
)
export type Event = Static<typeof EventSchema>

/** GET /events: the paging parameters and an optional type. */
export const ListEventsQuery = Type.Object(
  {
    ...ListQuery,
    type: Type.Optional(Type.Union(EVENT_TYPES.map((t) => Type.Literal(t)))),
  },
  { additionalProperties: false },
)
export type ListEventsFilters = Omit<Static<typeof ListEventsQuery>, 'limit' | 'after'>

/**
 * A new event's id and its body around the resource: the body is `prefix`, the resource serialized
 * as stored (spliced in rather than serialized again: the same bytes JSON.stringify of the whole
 * event would give), then `suffix`. A write that has the resource only in the database (a delete
 * in one statement, src/contacts/contact-writes.ts) splices it there.
 */
export function eventEnvelope(type: EventType, now: string): { id: string; prefix: string; suffix: string } {
  const id = newId('event')
  const prefix = `{"object":"event","id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"created_at":${JSON.stringify(now)},"data":{"object":`
  return { id, prefix, suffix: '}}' }
}

/** Writes the event in the change's transaction, at its feed position (feed-position.ts). */
export async function recordEvent(
  trx: Trx,
  accountId: string,
  type: EventType,
  objectBody: string,
  now: string,
): Promise<void> {
  const { id, prefix, suffix } = eventEnvelope(type, now)
  const body = `${prefix}${objectBody}${suffix}`
  const txId = await newEventPosition(trx)
  await trx
    .insertInto('events')
    .values({ account_id: accountId, id, tx_id: txId, type, created_at: now, body })
    .execute()
}

/**
 * Writes several events of one transaction with one INSERT (a batch of contact changes), in the
 * order given: they share one feed position and their ids (monotonic in this process) order them
 * within it, so the feed lists them in this order, after the transaction's earlier events. Each
 * body is the one recordEvent writes.
 */
export async function recordEvents(
  trx: Trx,
  accountId: string,
  changes: ReadonlyArray<{ type: EventType; objectBody: string }>,
  now: string,
): Promise<void> {
  if (changes.length === 0) {
    return
  }
  const txId = await newEventPosition(trx)
  const rows = changes.map(({ type, objectBody }) => {
    const id = newId('event')
    const body = `{"object":"event","id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"created_at":${JSON.stringify(now)},"data":{"object":${objectBody}}}`
    return { account_id: accountId, id, tx_id: txId, type, created_at: now, body }
  })
  await trx.insertInto('events').values(rows).execute()
}
