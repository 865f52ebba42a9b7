// Events: their schema and list query; every change to a resource is recorded in the same
// transaction as the change (outbox).
import { type Static, Type } from '@sinclair/typebox'
import type { Trx } from '../db/transaction.js'
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

/**
 * Writes the event in the change's transaction, at its feed position (feed-position.ts). The
 * resource comes serialized, as stored: spliced into the event's body rather than serialized again
 * (the same bytes JSON.stringify of the whole event would give).
 */
export async function recordEvent(
  trx: Trx,
  accountId: string,
  type: EventType,
  objectBody: string,
  now: string,
): Promise<void> {
  const id = newId('event')
  const body = `{"object":"event","id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"created_at":${JSON.stringify(now)},"data":{"object":${objectBody}}}`
  const txId = await newEventPosition(trx)
  await trx
    .insertInto('events')
    .values({ account_id: accountId, id, tx_id: txId, type, created_at: now, body })
    .execute()
}
