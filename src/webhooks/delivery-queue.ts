// The delivery queue, as the worker sees it: the fan-out of events into deliveries, the claim of
// due deliveries under a lease, and the record of each attempt. Every step is one short
// transaction, safe with several workers on PostgreSQL and with a worker process beside the
// server on SQLite.
//
// - Fan-out, off the write path: a write records its event only (events.ts). dispatchEvents walks
//   the events feed in its commit order (feed-position.ts) from a cursor kept in webhook_dispatch,
//   and adds one delivery per matching enabled endpoint, moving the cursor in the same
//   transaction: each event fans out exactly once, whatever crashes.
// - Scheduling, fair between endpoints: each endpoint keeps `due_at`, the earliest time one of its
//   deliveries is due. Workers take endpoints in due_at order and claim at most a few deliveries of
//   each, so one endpoint's backlog (a dead receiver, a flood of writes) delays only itself.
//   The rule that keeps due_at right: anyone may move it earlier (markDue), only a claim, holding
//   the endpoint's row, moves it later, to the next time something of the endpoint will be due.
// - Leases: a claim sets next_attempt_at (and lease_expires_at) to now + lease. An attempt that
//   never reports (its worker was killed) is simply due again then: nothing is lost, and a
//   duplicate happens only after a lease has run out.
import { type Kysely, sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import type { Trx } from '../db/transaction.js'
import { feedFence } from '../events/feed-position.js'
import { type DeliveryRow, markDue, pendingDelivery } from './deliveries.store.js'
import { subscribes } from './endpoints.js'
import { disableEndpoint, type EndpointRow, setEndpointColumns } from './endpoints.store.js'
import type { DeliveryResult } from './webhook-post.js'

/** Events one fan-out transaction takes at most. */
export const DISPATCH_BATCH = 500
/**
 * An endpoint left with due deliveries after a claim (its slots were full) is looked at again this
 * soon at the latest: when the claiming worker was killed, no completion of its will do it.
 */
export const REVISIT_MS = 1000
/** Failing this long without a success disables an endpoint (`failing`). */
export const FAILING_DISABLE_MS = 5 * 86_400_000

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
      // In key order, as recordAttempts locks endpoints: no deadlock between them on PostgreSQL.
      for (const [, delivery] of [...due].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        await markDue(trx, delivery.account_id, delivery.endpoint_id, at)
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
    // Whatever is left due now waits for a free slot: a completion moves due_at back (markDue). If
    // this worker dies first, the endpoint is looked at again after REVISIT_MS, not at the lease's end.
    const [next, stillDue] = await Promise.all([
      trx
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.min('next_attempt_at').as('at'))
        .where('account_id', '=', ref.accountId)
        .where('endpoint_id', '=', ref.id)
        .where('next_attempt_at', '>', at)
        .executeTakeFirst(),
      trx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('account_id', '=', ref.accountId)
        .where('endpoint_id', '=', ref.id)
        .where('next_attempt_at', '<=', at)
        .limit(1)
        .executeTakeFirst(),
    ])
    const revisit = new Date(now.getTime() + REVISIT_MS).toISOString()
    const dueAt = stillDue && (next?.at ?? revisit) > revisit ? revisit : (next?.at ?? null)
    await setEndpointColumns(trx, ref.accountId, ref.id, { due_at: dueAt })
    return {
      endpoint,
      deliveries: due.map((delivery) => ({ ...delivery, next_attempt_at: lease, lease_expires_at: lease })),
    }
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
  // SQLite: write first, to hold the write lock for the whole claim (see lockDispatchCursor).
  return trx
    .updateTable('webhook_endpoints')
    .set((eb) => ({ due_at: eb.ref('due_at') }))
    .where('account_id', '=', ref.accountId)
    .where('id', '=', ref.id)
    .where('status', '=', 'enabled')
    .returningAll()
    .executeTakeFirst()
}

export interface RetryPolicy {
  /** WEBHOOK_RETRY_SCHEDULE: seconds before each retry. */
  scheduleS: readonly number[]
  /** [0, 1): the ±10 % jitter. */
  random: () => number
}

export type AttemptStatus = 'succeeded' | 'retrying' | 'failed'

export interface AttemptRecord {
  /** What the delivery became; `stale` when its lease had run out and another attempt took it over. */
  status: AttemptStatus | 'stale'
  /** The endpoint was disabled by this attempt. */
  disabled: 'gone' | 'failing' | null
}

/**
 * Records one attempt's outcome: success; a retry per the schedule (with jitter); or failed, when
 * retries are exhausted, the endpoint answered 410 (it is disabled, `gone`), or the endpoint has
 * failed without a success for 5 days (disabled, `failing`). An attempt whose lease was taken over
 * records nothing and changes nothing: the attempt that holds the delivery now will.
 */
export async function recordAttempt(
  db: Kysely<Database>,
  delivery: ClaimedDelivery,
  startedAt: Date,
  result: DeliveryResult,
  policy: RetryPolicy,
  now: Date,
  /** No retry can succeed, and it is not the endpoint's failure (the event was purged). */
  final = false,
): Promise<AttemptRecord> {
  const [record] = await recordAttempts(db, [{ delivery, startedAt, result, final }], policy, now)
  return record as AttemptRecord
}

export interface Attempt {
  delivery: ClaimedDelivery
  startedAt: Date
  result: DeliveryResult
  /** No retry can succeed, and it is not the endpoint's failure (the event was purged). */
  final?: boolean
}

/**
 * Records several attempts' outcomes in one transaction, each exactly as recordAttempt would, in
 * order: one commit (SQLite: one WAL write of the pages they share) instead of one per attempt. The
 * worker batches the attempts that finish while the previous batch is being recorded. If the
 * transaction fails, none is recorded: their leases run out and they are attempted again, as when a
 * single record fails.
 */
export async function recordAttempts(
  db: Kysely<Database>,
  attempts: readonly Attempt[],
  policy: RetryPolicy,
  now: Date,
): Promise<AttemptRecord[]> {
  // Endpoint by endpoint, in one order for every writer (so is dispatchEvents' markDue): two
  // workers' batches lock endpoint rows in the same order and cannot deadlock on PostgreSQL.
  const order = attempts
    .map((attempt, index) => ({ key: `${attempt.delivery.account_id} ${attempt.delivery.endpoint_id}`, index }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index))
  return db.transaction().execute(async (trx) => {
    const records: AttemptRecord[] = new Array(attempts.length)
    // Per endpoint, what every attempt of it would repeat is done once: its row is read once (its
    // status and failure run, kept up to date here), and due_at is brought forward to the earliest
    // delivery still pending once all of the endpoint's attempts are recorded.
    let group:
      | { key: string; accountId: string; endpointId: string; state: EndpointState; recorded: boolean }
      | undefined
    const closeGroup = async () => {
      if (group?.recorded) {
        await markPending(trx, group.accountId, group.endpointId)
      }
    }
    for (const { key, index } of order) {
      const attempt = attempts[index] as Attempt
      if (group?.key !== key) {
        await closeGroup()
        const { account_id: accountId, endpoint_id: endpointId } = attempt.delivery
        group = { key, accountId, endpointId, state: await endpointState(trx, accountId, endpointId), recorded: false }
      }
      const record = await recordOne(trx, attempt, policy, now, group.state)
      group.recorded ||= record.status !== 'stale'
      records[index] = record
    }
    await closeGroup()
    return records
  })
}

/** What the outcomes of an endpoint's attempts depend on, read once per endpoint and batch. */
interface EndpointState {
  status: 'enabled' | 'disabled' | undefined
  failingSince: string | null
}

async function endpointState(trx: Trx, accountId: string, endpointId: string): Promise<EndpointState> {
  const row = await trx
    .selectFrom('webhook_endpoints')
    .select(['status', 'failing_since'])
    .where('account_id', '=', accountId)
    .where('id', '=', endpointId)
    .executeTakeFirst()
  return { status: row?.status, failingSince: row?.failing_since ?? null }
}

/**
 * One attempt's outcome, against the endpoint's `state` (updated here as this attempt changes the
 * endpoint). The delivery is written first, under its lease: a stale attempt stops there, having
 * changed nothing. Alone (recordAttempt) the caller brings due_at forward; in a batch,
 * recordAttempts does that once per endpoint.
 */
async function recordOne(
  trx: Trx,
  { delivery, startedAt, result, final = false }: Attempt,
  policy: RetryPolicy,
  now: Date,
  state: EndpointState,
): Promise<AttemptRecord> {
  const { account_id: accountId, endpoint_id: endpointId } = delivery
  const attempts = delivery.attempts + 1
  const delay = policy.scheduleS[attempts - 1]
  const gone = !result.ok && result.statusCode === 410
  let status: AttemptStatus = 'failed'
  let nextAttemptAt: string | null = null
  if (result.ok) {
    status = 'succeeded'
  } else if (!final && !gone && delay !== undefined && state.status === 'enabled') {
    status = 'retrying'
    const jittered = delay * 1000 * (0.9 + 0.2 * policy.random())
    nextAttemptAt = new Date(now.getTime() + jittered).toISOString()
  }
  const updated = await trx
    .updateTable('webhook_deliveries')
    .set({
      status,
      attempts,
      next_attempt_at: nextAttemptAt,
      lease_expires_at: null,
      last_attempt_at: startedAt.toISOString(),
      last_status_code: result.statusCode,
      last_duration_ms: result.durationMs,
      last_error: result.error,
      last_response_excerpt: result.excerpt,
    })
    .where('account_id', '=', accountId)
    .where('id', '=', delivery.id)
    .where('lease_expires_at', '=', delivery.lease_expires_at)
    .executeTakeFirst()
  if (Number(updated.numUpdatedRows) === 0) {
    return { status: 'stale', disabled: null }
  }
  let disabled: AttemptRecord['disabled'] = null
  if (result.ok) {
    if (state.failingSince !== null) {
      await setEndpointColumns(trx, accountId, endpointId, { failing_since: null })
      state.failingSince = null
    }
  } else if (gone) {
    disabled = (await disableEndpoint(trx, accountId, endpointId, 'gone', now)) ? 'gone' : null
  } else if (!final) {
    if (state.failingSince === null) {
      state.failingSince = now.toISOString()
      await setEndpointColumns(trx, accountId, endpointId, { failing_since: state.failingSince })
    } else if (now.getTime() - Date.parse(state.failingSince) >= FAILING_DISABLE_MS) {
      // Also ends this delivery, if it was to be retried, as failed.
      disabled = (await disableEndpoint(trx, accountId, endpointId, 'failing', now)) ? 'failing' : null
    }
  }
  if (disabled) {
    state.status = 'disabled'
  }
  return { status: disabled && status === 'retrying' ? 'failed' : status, disabled }
}

/** The endpoint may have more waiting: the claim moved due_at past them while its attempts were out. */
async function markPending(trx: Trx, accountId: string, endpointId: string): Promise<void> {
  const pending = await trx
    .selectFrom('webhook_deliveries')
    .select((eb) => eb.fn.min('next_attempt_at').as('at'))
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
    .where('next_attempt_at', 'is not', null)
    .executeTakeFirst()
  if (pending?.at) {
    await markDue(trx, accountId, endpointId, pending.at)
  }
}
