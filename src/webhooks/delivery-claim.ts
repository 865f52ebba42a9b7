// Claiming due deliveries under a lease, endpoint by endpoint (docs/design.md#delivery-queue).
import type { Kysely } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import type { Trx } from '../db/transaction.js'
import { type DeliveryRow, markDue } from './deliveries.store.js'
import { type EndpointRow, setEndpointColumns } from './endpoints.store.js'

/** An endpoint left with due deliveries after a claim is looked at again this soon, in case its worker died. */
export const REVISIT_MS = 1000

export interface EndpointRef {
  accountId: string
  id: string
}

/** Enabled endpoints with a delivery due by `now`, the longest waiting first. */
export async function dueEndpoints(db: Kysely<Database>, now: Date, limit: number): Promise<EndpointRef[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select(['account_id', 'id'])
    .where('due_at', '<=', now.toISOString())
    .where('status', '=', 'enabled')
    .orderBy('due_at')
    .limit(limit)
    .execute()
  return rows.map((row) => ({ accountId: row.account_id, id: row.id }))
}

/** A claimed delivery, with its event's body when it has one (null once the event is purged). */
export type ClaimedDelivery = DeliveryRow & { event_body: string | null }

export interface Claim {
  endpoint: EndpointRow
  deliveries: ClaimedDelivery[]
}

/**
 * Claims up to `max` due deliveries of one enabled endpoint under a lease of `leaseMs`, and moves
 * the endpoint's due_at to the next time something of it is due. Undefined when the endpoint is
 * disabled, gone, or being claimed by another worker this moment.
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  ref: EndpointRef,
  now: Date,
  max: number,
  leaseMs: number,
): Promise<Claim | undefined> {
  return db.transaction().execute(async (trx) => {
    const endpoint = await lockEndpoint(trx, ref)
    if (!endpoint) {
      return undefined
    }
    const at = now.toISOString()
    const due = await trx
      .selectFrom('webhook_deliveries as d')
      .leftJoin('events as e', (join) =>
        join.onRef('e.account_id', '=', 'd.account_id').onRef('e.id', '=', 'd.event_id'),
      )
      .selectAll('d')
      .select('e.body as event_body')
      .where('d.account_id', '=', ref.accountId)
      .where('d.endpoint_id', '=', ref.id)
      .where('d.next_attempt_at', '<=', at)
      .orderBy('d.next_attempt_at')
      .limit(max)
      .execute()
    const lease = new Date(now.getTime() + leaseMs).toISOString()
    if (due.length > 0) {
      await trx
        .updateTable('webhook_deliveries')
        .set({ next_attempt_at: lease, lease_expires_at: lease })
        .where('account_id', '=', ref.accountId)
        .where(
          'id',
          'in',
          due.map((delivery) => delivery.id),
        )
        .execute()
    }
    // What is left due waits for a free slot: a completion moves due_at back (markDue), or REVISIT_MS.
    // Fewer than `max` due means none is left due; `max` of them, that some may be.
    const stillDue = due.length >= max
    const next = await trx
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('at'))
      .where('account_id', '=', ref.accountId)
      .where('endpoint_id', '=', ref.id)
      .where('next_attempt_at', '>', at)
      .executeTakeFirst()
    const revisit = new Date(now.getTime() + REVISIT_MS).toISOString()
    const dueAt = stillDue && (next?.at ?? revisit) > revisit ? revisit : (next?.at ?? null)
    await setEndpointColumns(trx, ref.accountId, ref.id, { due_at: dueAt })
    return {
      endpoint,
      deliveries: due.map((delivery) => ({ ...delivery, next_attempt_at: lease, lease_expires_at: lease })),
    }
  })
}

/**
 * Gives claimed deliveries that were never attempted back: due at once, for any worker. Each only
 * under the lease it was claimed with (one taken over since is another worker's now).
 */
export async function releaseClaimed(
  db: Kysely<Database>,
  endpoint: EndpointRow,
  deliveries: readonly ClaimedDelivery[],
  now: Date,
): Promise<void> {
  if (deliveries.length === 0) {
    return
  }
  const at = now.toISOString()
  await db.transaction().execute(async (trx) => {
    for (const delivery of deliveries) {
      await trx
        .updateTable('webhook_deliveries')
        .set({ next_attempt_at: at, lease_expires_at: null })
        .where('account_id', '=', endpoint.account_id)
        .where('id', '=', delivery.id)
        .where('lease_expires_at', '=', delivery.lease_expires_at)
        .execute()
    }
    await markDue(trx, endpoint.account_id, endpoint.id, at)
  })
}

/** The endpoint's row, locked for the claim (PostgreSQL: skipped if another worker holds it). */
async function lockEndpoint(trx: Trx, ref: EndpointRef): Promise<EndpointRow | undefined> {
  const query = trx
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('account_id', '=', ref.accountId)
    .where('id', '=', ref.id)
    .where('status', '=', 'enabled')
  if (dialectOf(trx) === 'postgres') {
    // NO KEY UPDATE: the fan-out's inserts (their foreign key's KEY SHARE lock) need not wait for it.
    return query.forNoKeyUpdate().skipLocked().executeTakeFirst()
  }
  // SQLite: write first, to hold the write lock for the whole claim (as lockDispatchCursor does).
  return trx
    .updateTable('webhook_endpoints')
    .set((eb) => ({ due_at: eb.ref('due_at') }))
    .where('account_id', '=', ref.accountId)
    .where('id', '=', ref.id)
    .where('status', '=', 'enabled')
    .returningAll()
    .executeTakeFirst()
}
