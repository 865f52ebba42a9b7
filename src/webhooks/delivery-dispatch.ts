// The fan-out of events into deliveries, off the write path (docs/design.md#delivery-queue).
import { type Kysely, sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import type { Trx } from '../db/transaction.js'
import { feedFence } from '../events/feed-position.js'
import { type DeliveryRow, markDueIfEnabled, pendingDelivery } from './deliveries.store.js'
import { subscribes } from './endpoints.js'
import { failPendingDeliveries } from './endpoints.store.js'

/** Events one fan-out transaction takes at most. */
export const DISPATCH_BATCH = 500

/** Moves the next batch of events past the dispatch cursor into deliveries; returns how many events. */
export async function dispatchEvents(db: Kysely<Database>, now: Date, batch = DISPATCH_BATCH): Promise<number> {
  // Most ticks find nothing new: a read says so without taking the cursor's lock (on SQLite, the
  // write lock), so an idle worker polling often writes nothing.
  if (!(await hasUndispatchedEvents(db))) {
    return 0
  }
  return db.transaction().execute(async (trx) => {
    const cursor = await lockDispatchCursor(trx)
    if (!cursor) {
      return 0 // another worker is fanning out this moment
    }
    let query = trx
      .selectFrom('events')
      .select(['account_id', 'id', 'type', 'created_at', 'tx_id'])
      .where(({ eb, refTuple, tuple }) => eb(refTuple('tx_id', 'id'), '>', tuple(cursor.tx_id, cursor.event_id)))
    const fence = feedFence(trx)
    if (fence !== undefined) {
      query = query.where('tx_id', '<', fence)
    }
    const events = await query.orderBy('tx_id').orderBy('id').limit(batch).execute()
    const last = events.at(-1)
    if (!last) {
      return 0
    }
    const accounts = [...new Set(events.map((event) => event.account_id))]
    const endpoints = await trx
      .selectFrom('webhook_endpoints')
      .select(['account_id', 'id', 'events', 'created_at'])
      .where('account_id', 'in', accounts)
      .where('status', '=', 'enabled')
      .execute()
    if (endpoints.length > 0) {
      const byAccount = new Map<string, Array<{ id: string; types: string[]; created_at: string }>>()
      for (const endpoint of endpoints) {
        const list = byAccount.get(endpoint.account_id) ?? []
        list.push({ id: endpoint.id, types: JSON.parse(endpoint.events) as string[], created_at: endpoint.created_at })
        byAccount.set(endpoint.account_id, list)
      }
      const at = now.toISOString()
      const deliveries: DeliveryRow[] = []
      for (const event of events) {
        for (const endpoint of byAccount.get(event.account_id) ?? []) {
          // An endpoint gets the events written from its creation on, not the backlog before it.
          if (subscribes(endpoint.types, event.type) && endpoint.created_at <= event.created_at) {
            deliveries.push(
              pendingDelivery({ accountId: event.account_id, endpointId: endpoint.id, event, payload: null, at }),
            )
          }
        }
      }
      // 18 columns a row: 200 rows stay far below SQLite's 32,766 bound parameters.
      for (let i = 0; i < deliveries.length; i += 200) {
        await trx
          .insertInto('webhook_deliveries')
          .values(deliveries.slice(i, i + 200))
          .execute()
      }
      const due = new Map(deliveries.map((delivery) => [`${delivery.account_id} ${delivery.endpoint_id}`, delivery]))
      // In key order, as recordAttempts (delivery-attempts.ts) locks endpoints: no deadlock on PostgreSQL.
      for (const [, delivery] of [...due].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        // Disabled since the read above (its outcome batch committed meanwhile, and its failing of
        // pending deliveries could not see these): they end as failed too, not pending for ever.
        if (!(await markDueIfEnabled(trx, delivery.account_id, delivery.endpoint_id, at))) {
          await failPendingDeliveries(trx, delivery.account_id, delivery.endpoint_id)
        }
      }
    }
    await trx
      .updateTable('webhook_dispatch')
      .set({ tx_id: last.tx_id, event_id: last.id })
      .where('name', '=', 'events')
      .execute()
    return events.length
  })
}

/** Whether an event visible to the feed lies past the dispatch cursor. */
async function hasUndispatchedEvents(db: Kysely<Database>): Promise<boolean> {
  const cursor = await db
    .selectFrom('webhook_dispatch')
    .select(['tx_id', 'event_id'])
    .where('name', '=', 'events')
    .executeTakeFirst()
  if (!cursor) {
    return false
  }
  let query = db
    .selectFrom('events')
    .select('id')
    .where(({ eb, refTuple, tuple }) => eb(refTuple('tx_id', 'id'), '>', tuple(cursor.tx_id, cursor.event_id)))
  const fence = feedFence(db)
  if (fence !== undefined) {
    query = query.where('tx_id', '<', fence)
  }
  return (await query.limit(1).executeTakeFirst()) !== undefined
}

/**
 * Takes the dispatch cursor for this transaction. PostgreSQL: the row lock, skipped if another
 * worker holds it. SQLite: a write as the first statement takes the database's write lock at once
 * (a read first could not be upgraded later if another process wrote in between).
 */
async function lockDispatchCursor(trx: Trx): Promise<{ tx_id: number; event_id: string } | undefined> {
  if (dialectOf(trx) === 'postgres') {
    const { rows } = await sql<{ tx_id: string; event_id: string }>`
      select tx_id, event_id from webhook_dispatch where name = 'events' for update skip locked`.execute(trx)
    const row = rows[0]
    return row && { tx_id: Number(row.tx_id), event_id: row.event_id }
  }
  return trx
    .updateTable('webhook_dispatch')
    .set((eb) => ({ tx_id: eb.ref('tx_id') }))
    .where('name', '=', 'events')
    .returning(['tx_id', 'event_id'])
    .executeTakeFirst()
}
