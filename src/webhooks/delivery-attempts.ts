// Recording attempts' outcomes: retry, success, failure, disabling (docs/design.md#delivery-queue).
import type { Kysely } from 'kysely'
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
 * Records several attempts' outcomes in one transaction: one commit instead of one per attempt. If
 * it fails, none is recorded: their leases run out and they are attempted again.
 */
export async function recordAttempts(
  db: Kysely<Database>,
  attempts: readonly Attempt[],
  policy: RetryPolicy,
  now: Date,
): Promise<AttemptRecord[]> {
  // One lock order for every writer (dispatchEvents' markDue too): no deadlock on PostgreSQL.
  const order = attempts
    .map((attempt, index) => ({ key: `${attempt.delivery.account_id} ${attempt.delivery.endpoint_id}`, index }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index))
  return db.transaction().execute(async (trx) => {
    const records: AttemptRecord[] = new Array(attempts.length)
    const history: WebhookAttemptsTable[] = []
    // Per endpoint: its row is read once, and due_at brought forward once after its last attempt.
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
      if (record.status !== 'stale') {
        group.recorded = true
        history.push(attemptRow(attempt))
      }
      records[index] = record
    }
    await closeGroup()
    // One statement for the batch's history: its rows are in the same commit as the deliveries'.
    for (let at = 0; at < history.length; at += HISTORY_ROWS_PER_INSERT) {
      await trx
        .insertInto('webhook_attempts')
        .values(history.slice(at, at + HISTORY_ROWS_PER_INSERT))
        .execute()
    }
    return records
  })
}

/** Well under SQLite's limit of bound parameters in one statement. */
const HISTORY_ROWS_PER_INSERT = 500

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
 * One attempt's outcome, against the endpoint's `state` (updated as this attempt changes it). The
 * delivery is written first, under its lease: a stale attempt stops there, having changed nothing.
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
