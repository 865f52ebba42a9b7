// Tenant-scoped delivery reads and the ways a person adds attempts: retry one delivery, recover
// every failed one of a time range, or send a test event. The worker's side is delivery-dispatch.ts, -claim.ts, -attempts.ts.

import { sql } from 'kysely'
import { tenantById } from '../accounts/tenant.js'
import { purgeOlderThan } from '../db/retention.js'
import type { Db, Trx } from '../db/transaction.js'
import type { PageRow } from '../http/pagination.js'
import { newId } from '../lib/ids.js'
import { type ListDeliveriesFilters, toAttempt, toDelivery } from './deliveries.js'
import { TEST_EVENT_TYPE } from './endpoints.js'
import { deliveryPayload } from './payload.js'
import type { WebhookAttemptsTable, WebhookDeliveriesTable } from './webhooks.table.js'

export type DeliveryRow = WebhookDeliveriesTable

/** A page of one endpoint's deliveries, newest first (the log a person reads), serialized for sendPage. */
export async function listDeliveryRows(
  db: Db,
  accountId: string,
  endpointId: string,
  options: ListDeliveriesFilters & { afterId: string | undefined; fetch: number },
): Promise<PageRow[]> {
  let query = db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
  if (options.status !== undefined) {
    query = query.where('status', '=', options.status)
  }
  if (options.afterId !== undefined) {
    query = query.where('id', '<', options.afterId)
  }
  const rows = await query.orderBy('id', 'desc').limit(options.fetch).execute()
  return rows.map((row) => ({ id: row.id, body: JSON.stringify(toDelivery(row)) }))
}

export async function findDelivery(
  db: Db,
  accountId: string,
  endpointId: string,
  id: string,
): Promise<DeliveryRow | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
    .where('id', '=', id)
    .executeTakeFirst()
}

/** The body this delivery sends: its own payload, or its event's (undefined once the event is purged). */
export async function findDeliveryBody(db: Db, delivery: DeliveryRow): Promise<string | undefined> {
  const event =
    delivery.payload === null
      ? await db
          .selectFrom('events')
          .select('body')
          .where('account_id', '=', delivery.account_id)
          .where('id', '=', delivery.event_id)
          .executeTakeFirst()
      : undefined
  return deliveryPayload(delivery, event?.body)
}

/**
 * One more attempt, now: whatever the delivery's status, unless an attempt is already under way
 * (then that one is the attempt asked for). Returns the delivery as it is afterwards.
 */
export async function retryDelivery(trx: Trx, row: DeliveryRow, now: Date): Promise<DeliveryRow> {
  if (row.lease_expires_at !== null && row.lease_expires_at > now.toISOString()) {
    return row
  }
  const at = now.toISOString()
  const changes = { status: 'retrying' as const, next_attempt_at: at, lease_expires_at: null }
  await trx
    .updateTable('webhook_deliveries')
    .set(changes)
    .where('account_id', '=', row.account_id)
    .where('id', '=', row.id)
    .execute()
  await markDue(trx, row.account_id, row.endpoint_id, at)
  return { ...row, ...changes }
}

/**
 * Every `failed` delivery of the endpoint created in [since, until) is due again now, for one more
 * attempt each (as retryDelivery does one). Returns how many were queued.
 */
export async function recoverDeliveries(
  trx: Trx,
  accountId: string,
  endpointId: string,
  range: { since: string; until: string },
  now: Date,
): Promise<number> {
  const at = now.toISOString()
  const updated = await trx
    .updateTable('webhook_deliveries')
    .set({ status: 'retrying', next_attempt_at: at, lease_expires_at: null })
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'failed')
    .where('created_at', '>=', range.since)
    .where('created_at', '<', range.until)
    .executeTakeFirst()
  const queued = Number(updated.numUpdatedRows)
  if (queued > 0) {
    await markDue(trx, accountId, endpointId, at)
  }
  return queued
}

/** A page of one delivery's attempts, oldest first, serialized for sendPage; the cursor is the attempt's number. */
export async function listAttemptRows(
  db: Db,
  accountId: string,
  deliveryId: string,
  position: { afterId: string | undefined; fetch: number },
): Promise<PageRow[]> {
  const after = position.afterId === undefined ? 0 : Number(position.afterId)
  const rows = await readAttempts(db, accountId, deliveryId, { after, limit: position.fetch })
  return rows.map((row) => ({ id: String(row.attempt), body: JSON.stringify(toAttempt(row)) }))
}

/** A delivery's attempts numbered after `after`, oldest first; or with `newest`, the last `limit` of them. */
export async function readAttempts(
  db: Db,
  accountId: string,
  deliveryId: string,
  options: { after?: number; limit: number; newest?: boolean },
): Promise<WebhookAttemptsTable[]> {
  const rows = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('delivery_id', '=', deliveryId)
    .where('attempt', '>', options.after ?? 0)
    .orderBy('attempt', options.newest ? 'desc' : 'asc')
    .limit(options.limit)
    .execute()
  return options.newest ? rows.reverse() : rows
}

/** Queues a `webhook.test` event for one endpoint, whatever it subscribes to. */
export async function insertTestDelivery(
  trx: Trx,
  accountId: string,
  endpointId: string,
  now: Date,
): Promise<DeliveryRow> {
  const at = now.toISOString()
  const eventId = newId('event', now.getTime())
  const row = pendingDelivery({
    accountId,
    endpointId,
    event: { id: eventId, type: TEST_EVENT_TYPE, created_at: at },
    payload: JSON.stringify({
      type: TEST_EVENT_TYPE,
      timestamp: at,
      livemode: tenantById(accountId).livemode,
      data: { object: { object: 'webhook_endpoint', id: endpointId } },
    }),
    at,
  })
  await trx.insertInto('webhook_deliveries').values(row).execute()
  await markDue(trx, accountId, endpointId, at)
  return row
}

/** A new delivery of an event to one endpoint, due at `at`; `payload` when the body is not the event's. */
export function pendingDelivery(delivery: {
  accountId: string
  endpointId: string
  event: { id: string; type: string; created_at: string }
  payload: string | null
  at: string
}): DeliveryRow {
  const { accountId, endpointId, event, payload, at } = delivery
  return {
    account_id: accountId,
    id: newId('webhookDelivery', Date.parse(at)),
    endpoint_id: endpointId,
    event_id: event.id,
    event_type: event.type,
    event_created_at: event.created_at,
    status: 'pending',
    attempts: 0,
    next_attempt_at: at,
    lease_expires_at: null,
    last_attempt_at: null,
    last_status_code: null,
    last_duration_ms: null,
    last_error: null,
    last_response_excerpt: null,
    payload,
    created_at: at,
  }
}

/**
 * Tells the worker that a delivery of the endpoint is due at `at`: only ever moves the endpoint's
 * `due_at` earlier, so it is safe from any transaction (docs/design.md#delivery-queue explains the rule).
 */
export async function markDue(trx: Db, accountId: string, endpointId: string, at: string): Promise<void> {
  await trx
    .updateTable('webhook_endpoints')
    .set({ due_at: at })
    .where('account_id', '=', accountId)
    .where('id', '=', endpointId)
    .where((eb) => eb.or([eb('due_at', 'is', null), eb('due_at', '>', at)]))
    .execute()
}

/**
 * markDue for a new delivery, under the endpoint's row lock: false, and nothing changed, when the
 * endpoint is no longer enabled (an UPDATE re-reads a row another transaction changed meanwhile).
 * Unlike markDue it matches the enabled row whatever its `due_at`, so that it can say so.
 */
export async function markDueIfEnabled(trx: Db, accountId: string, endpointId: string, at: string): Promise<boolean> {
  const row = await trx
    .updateTable('webhook_endpoints')
    .set({ due_at: sql<string>`case when due_at is null or due_at > ${at} then ${at} else due_at end` })
    .where('account_id', '=', accountId)
    .where('id', '=', endpointId)
    .where('status', '=', 'enabled')
    .returning('id')
    .executeTakeFirst()
  return row !== undefined
}

/** Deliveries created before `now` minus the retention, in batches (db/retention.ts). */
export const purgeExpiredDeliveries = (db: Db, now: Date, retentionDays: number, batch?: number): Promise<number> =>
  purgeOlderThan(db, 'webhook_deliveries', now, retentionDays, batch)
