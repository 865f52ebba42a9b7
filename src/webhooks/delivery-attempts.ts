// Recording attempts' outcomes: retry, success, failure, disabling (docs/design.md#delivery-queue).
import { type Kysely, sql } from 'kysely'
import { PLAN_PER_CALL } from '../db/database.js'
import type { Database } from '../db/schema.js'
import type { Trx } from '../db/transaction.js'
import { markDue } from './deliveries.store.js'
import type { ClaimedDelivery } from './delivery-claim.js'
import { disableEndpoint, setEndpointColumns } from './endpoints.store.js'
import type { DeliveryResult } from './webhook-post.js'
import type { WebhookAttemptsTable } from './webhooks.table.js'

/** Failing this long without a success disables an endpoint (`failing`). */
export const FAILING_DISABLE_MS = 5 * 86_400_000

export interface RetryPolicy {
  scheduleS: readonly number[]
  /** [0, 1): the ±10 % jitter. */
  random: () => number
}

export type AttemptStatus = 'succeeded' | 'retrying' | 'failed'

export interface AttemptRecord {
  /** What the delivery became; `stale` when its lease had run out and another attempt took it over. */
  status: AttemptStatus | 'stale'
  disabled: 'gone' | 'failing' | null
}

/**
 * Records one attempt's outcome: succeeded, retrying per the schedule, or failed (retries exhausted,
 * or the endpoint disabled: `gone` on a 410, `failing` after FAILING_DISABLE_MS). An attempt whose
 * lease was taken over changes nothing: the attempt that holds the delivery now will record.
 */
export async function recordAttempt(
  db: Kysely<Database>,
  delivery: ClaimedDelivery,
  startedAt: Date,
  result: DeliveryResult,
  policy: RetryPolicy,
  now: Date,
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
 * Records several attempts' outcomes in one transaction: one commit instead of one per attempt, and
 * per account one statement that writes its deliveries (under their leases) and one that reads its
 * endpoints. If it fails, none is recorded: their leases run out and they are attempted again.
 */
export async function recordAttempts(
  db: Kysely<Database>,
  attempts: readonly Attempt[],
  policy: RetryPolicy,
  now: Date,
): Promise<AttemptRecord[]> {
  // One lock order for every writer (dispatchEvents' markDue too): no deadlock on PostgreSQL.
  const order = attempts
    .map((attempt, index) => ({ key: endpointKey(attempt.delivery), index }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index))
  return db.transaction().execute(async (trx) => {
    const accounts = indexesByAccount(attempts)
    const states = await endpointStates(trx, attempts, accounts)
    // What each attempt makes of its delivery, against its endpoint as the batch found it; an
    // endpoint disabled by an earlier attempt of the batch fails the later ones below (disableEndpoint).
    const outcomes = attempts.map((attempt) =>
      outcomeOf(attempt, policy, now, states.get(endpointKey(attempt.delivery)) as EndpointState),
    )
    const written = await writeDeliveries(trx, attempts, accounts, outcomes)
    const records: AttemptRecord[] = new Array(attempts.length)
    const history: WebhookAttemptsTable[] = []
    const disabledEndpoints = new Set<string>()
    let pending: { accountId: string; endpointId: string } | undefined
    for (const { key, index } of order) {
      const attempt = attempts[index] as Attempt
      const { account_id: accountId, endpoint_id: endpointId } = attempt.delivery
      if (pending && endpointKey({ account_id: pending.accountId, endpoint_id: pending.endpointId }) !== key) {
        await markPending(trx, pending.accountId, pending.endpointId)
        pending = undefined
      }
      const status = written.get(deliveryKey(attempt.delivery))
      if (status === undefined) {
        records[index] = { status: 'stale', disabled: null }
        continue
      }
      const disabled = await endpointEffects(trx, attempt, now, states.get(key) as EndpointState)
      if (disabled) {
        disabledEndpoints.add(key)
      }
      records[index] = { status, disabled }
      history.push(attemptRow(attempt))
      // due_at is brought forward once, after the endpoint's last attempt of the batch.
      pending = { accountId, endpointId }
    }
    if (pending) {
      await markPending(trx, pending.accountId, pending.endpointId)
    }
    for (const { key, index } of order) {
      const record = records[index] as AttemptRecord
      if (record.status === 'retrying' && disabledEndpoints.has(key)) {
        record.status = 'failed'
      }
    }
    // One statement for the batch's history: its rows are in the same commit as the deliveries'.
    for (let at = 0; at < history.length; at += HISTORY_ROWS_PER_INSERT) {
      await trx
        .insertInto('webhook_attempts')
        .values(history.slice(at, at + HISTORY_ROWS_PER_INSERT))
        .modifyEnd(sql.raw(PLAN_PER_CALL))
        .execute()
    }
    return records
  })
}

/** Well under SQLite's limit of bound parameters in one statement. */
const HISTORY_ROWS_PER_INSERT = 500

const endpointKey = (delivery: { account_id: string; endpoint_id: string }): string =>
  `${delivery.account_id} ${delivery.endpoint_id}`
const deliveryKey = (delivery: { account_id: string; id: string }): string => `${delivery.account_id} ${delivery.id}`

/** The history row of an attempt that was recorded: its number is the delivery's count after it. */
const attemptRow = ({ delivery, startedAt, result }: Attempt): WebhookAttemptsTable => ({
  account_id: delivery.account_id,
  delivery_id: delivery.id,
  attempt: delivery.attempts + 1,
  at: startedAt.toISOString(),
  status_code: result.statusCode,
  duration_ms: result.durationMs,
  error: result.error,
  response_excerpt: result.excerpt,
})

interface EndpointState {
  status: 'enabled' | 'disabled' | undefined
  failingSince: string | null
}

/** The batch's endpoints as they are, by endpointKey: one statement per account. */
async function endpointStates(
  trx: Trx,
  attempts: readonly Attempt[],
  accounts: Map<string, number[]>,
): Promise<Map<string, EndpointState>> {
  const states = new Map<string, EndpointState>()
  for (const [accountId, indexes] of accounts) {
    const endpointIds = new Set(indexes.map((index) => (attempts[index] as Attempt).delivery.endpoint_id))
    const rows = await trx
      .selectFrom('webhook_endpoints')
      .select(['id', 'status', 'failing_since'])
      .where('account_id', '=', accountId)
      .where('id', 'in', [...endpointIds].sort())
      .modifyEnd(sql.raw(PLAN_PER_CALL))
      .execute()
    for (const endpointId of endpointIds) {
      const row = rows.find((r) => r.id === endpointId)
      const key = endpointKey({ account_id: accountId, endpoint_id: endpointId })
      states.set(key, { status: row?.status, failingSince: row?.failing_since ?? null })
    }
  }
  return states
}

/** The attempts' indexes, per account: each account's statements cover its attempts. */
function indexesByAccount(attempts: readonly Attempt[]): Map<string, number[]> {
  const accounts = new Map<string, number[]>()
  attempts.forEach(({ delivery }, index) => {
    const indexes = accounts.get(delivery.account_id)
    if (indexes) {
      indexes.push(index)
    } else {
      accounts.set(delivery.account_id, [index])
    }
  })
  return accounts
}

interface Outcome {
  status: AttemptStatus
  nextAttemptAt: string | null
}

/** What an attempt makes of its delivery: succeeded, retrying per the schedule, or failed. */
function outcomeOf(
  { delivery, result, final = false }: Attempt,
  policy: RetryPolicy,
  now: Date,
  state: EndpointState,
): Outcome {
  const delay = policy.scheduleS[delivery.attempts]
  const gone = !result.ok && result.statusCode === 410
  if (result.ok) {
    return { status: 'succeeded', nextAttemptAt: null }
  }
  if (!final && !gone && delay !== undefined && state.status === 'enabled') {
    const jittered = delay * 1000 * (0.9 + 0.2 * policy.random())
    return { status: 'retrying', nextAttemptAt: new Date(now.getTime() + jittered).toISOString() }
  }
  return { status: 'failed', nextAttemptAt: null }
}

/**
 * Writes the outcomes to their deliveries, each only under the lease its attempt held: a stale
 * attempt (its lease was taken over) changes nothing. One statement per account; returns the
 * status each delivery written now has, by deliveryKey.
 */
// A delivery failed while its attempt was out (its endpoint disabled by another batch, which this
// one read as enabled) stays failed: a retry would outlive its endpoint. Nothing else fails a
// delivery under a lease, and a success is recorded as one.
const stillFailed = sql`webhook_deliveries.status = 'failed' and v.status = 'retrying'`

async function writeDeliveries(
  trx: Trx,
  attempts: readonly Attempt[],
  accounts: Map<string, number[]>,
  outcomes: Outcome[],
): Promise<Map<string, AttemptStatus>> {
  const written = new Map<string, AttemptStatus>()
  for (const [accountId, indexes] of accounts) {
    const rows = indexes.map((index) => {
      const { delivery, startedAt, result } = attempts[index] as Attempt
      const { status, nextAttemptAt } = outcomes[index] as Outcome
      return sql`(${delivery.id}, ${delivery.lease_expires_at}, ${status}, cast(${delivery.attempts + 1} as integer), ${nextAttemptAt}, ${startedAt.toISOString()}, cast(${result.statusCode} as integer), cast(${result.durationMs} as integer), ${result.error}, ${result.excerpt})`
    })
    // Column names given by the CTE, as both dialects allow; the values' order is the rows'.
    const { rows: updated } = await sql<{ id: string; status: AttemptStatus }>`
      with v (id, lease, status, attempts, next_attempt_at, attempt_at, status_code, duration_ms, error, excerpt)
        as (values ${sql.join(rows)})
      update webhook_deliveries set
        status = case when ${stillFailed} then 'failed' else v.status end,
        attempts = v.attempts,
        next_attempt_at = case when ${stillFailed} then null else v.next_attempt_at end,
        lease_expires_at = null, last_attempt_at = v.attempt_at, last_status_code = v.status_code,
        last_duration_ms = v.duration_ms, last_error = v.error, last_response_excerpt = v.excerpt
      from v
      where webhook_deliveries.account_id = ${accountId} and webhook_deliveries.id = v.id
        and webhook_deliveries.lease_expires_at = v.lease
      returning webhook_deliveries.id, webhook_deliveries.status ${sql.raw(PLAN_PER_CALL)}`.execute(trx)
    for (const { id, status } of updated) {
      written.set(deliveryKey({ account_id: accountId, id }), status)
    }
  }
  return written
}

/**
 * What a recorded attempt does to its endpoint, against `state` (updated as it changes it): a
 * success ends its run of failures; a 410 disables it (`gone`); a failure starts the run, or
 * disables it (`failing`) once the run has lasted FAILING_DISABLE_MS. Returns the disabling.
 */
async function endpointEffects(
  trx: Trx,
  { delivery, result, final = false }: Attempt,
  now: Date,
  state: EndpointState,
): Promise<AttemptRecord['disabled']> {
  const { account_id: accountId, endpoint_id: endpointId } = delivery
  let disabled: AttemptRecord['disabled'] = null
  if (result.ok) {
    if (state.failingSince !== null) {
      await setEndpointColumns(trx, accountId, endpointId, { failing_since: null })
      state.failingSince = null
    }
  } else if (result.statusCode === 410) {
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
  return disabled
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
