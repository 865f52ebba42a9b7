// Events: their schema and list query; every change to a resource is recorded in the same
// transaction as the change (outbox).
import { type Static, Type } from '@sinclair/typebox'
import type { Kysely, Transaction } from 'kysely'
import type { Database } from '../db/schema.js'
import { ListQuery, PrefixedId, Timestamp } from '../http/schemas.js'
import { newId } from '../lib/ids.js'
import { newEventPosition } from './feed-position.js'

export const EVENT_TYPES = ['contact.created', 'contact.updated', 'contact.deleted'] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const EventSchema = Type.Object(
  {
    object: Type.Literal('event'),
    id: PrefixedId('event'),
    type: Type.Union(EVENT_TYPES.map((t) => Type.Literal(t))),
    created_at: Timestamp,
    data: Type.Object({
      object: Type.Record(Type.String(), Type.Unknown(), {
        description: 'The resource after the change (for a deletion, as it was).',
      }),
    }),
  },
  { $id: 'Event', additionalProperties: false },
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

/** Writes the event in the change's transaction, at its feed position (feed-position.ts). */
export async function recordEvent(
  trx: Transaction<Database> | Kysely<Database>,
  accountId: string,
  type: EventType,
  object: object,
  now: string,
): Promise<void> {
  const event = { object: 'event', id: newId('event'), type, created_at: now, data: { object } }
  const txId = await newEventPosition(trx)
  await trx
    .insertInto('events')
    .values({ account_id: accountId, id: event.id, tx_id: txId, type, created_at: now, body: JSON.stringify(event) })
    .execute()
}
