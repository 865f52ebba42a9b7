// What a person or an integration does to webhook endpoints, for the API and the web app alike:
// each action checks its rules and commits with its audit entry (given an actor: the web app).
import type { Kysely } from 'kysely'
import { type AuditAction, type AuditActor, recordAudit } from '../audit/audit.js'
import type { Database } from '../db/schema.js'
import { type Db, inTransaction, type Trx } from '../db/transaction.js'
import { AppError, invalidParameter } from '../http/errors.js'
import {
  type DeliveryRow,
  findDelivery,
  insertTestDelivery,
  recoverDeliveries,
  retryDelivery,
} from './deliveries.store.js'
import {
  type CreateEndpointInput,
  ENDPOINTS_PER_ACCOUNT_MAX,
  eventsProblem,
  type PatchEndpointInput,
} from './endpoints.js'
import {
  countEndpointsForCreate,
  deleteEndpoint,
  type EndpointRow,
  findEndpoint,
  insertEndpoint,
  revealSecret,
  rollEndpointSecret,
  updateEndpoint,
} from './endpoints.store.js'
import { encryptSecret, newWebhookSecret } from './secrets.js'
import { checkWebhookUrl, type Resolver } from './webhook-url.js'

/** What the actions use; the composition root's Deps provides it as `deps.webhooks`. */
export interface WebhookActionsDeps {
  readonly db: Kysely<Database>
  /** Encrypts signing secrets at rest (secrets.ts webhookSecretKey). */
  readonly secretKey: Buffer
  readonly allowPrivateUrls: boolean
  readonly resolve: Resolver
}

/** An endpoint and its signing secret in clear: the create and roll answers, shown this once. */
export interface EndpointWithSecret {
  endpoint: EndpointRow
  secret: string
}

/** A signed-in person (audited), or undefined for an API key, whose requests are their own record. */
export type Actor = AuditActor | undefined

// `within` runs in the action's transaction: the API stores its Idempotency-Key answer there.

export async function createEndpoint(
  deps: WebhookActionsDeps,
  accountId: string,
  input: CreateEndpointInput,
  actor: Actor,
  now: Date,
  within?: (trx: Trx, created: EndpointWithSecret) => Promise<void>,
): Promise<EndpointWithSecret> {
  checkEvents(input.events)
  const url = await checkedUrl(deps, input.url)
  const secret = newWebhookSecret()
  const endpoint = await inTransaction(deps.db, async (trx) => {
    if ((await countEndpointsForCreate(trx, accountId)) >= ENDPOINTS_PER_ACCOUNT_MAX) {
      throw new AppError(
        'quota_exceeded',
        `An account can have at most ${ENDPOINTS_PER_ACCOUNT_MAX} webhook endpoints.`,
      )
    }
    const row = await insertEndpoint(trx, accountId, { ...input, url }, encryptSecret(secret, deps.secretKey), now)
    await audit(trx, accountId, actor, 'webhook_endpoint.created', row.id, { url: row.url }, now)
    await within?.(trx, { endpoint: row, secret })
    return row
  })
  return { endpoint, secret }
}

export async function changeEndpoint(
  deps: WebhookActionsDeps,
  accountId: string,
  id: string,
  patch: PatchEndpointInput,
  actor: Actor,
  now: Date,
): Promise<EndpointRow> {
  checkEvents(patch.events)
  const url = patch.url === undefined ? undefined : await checkedUrl(deps, patch.url)
  return inTransaction(deps.db, async (trx) => {
    const row = await updateEndpoint(trx, accountId, id, { ...patch, ...(url === undefined ? {} : { url }) }, now)
    if (!row) {
      throw notFound()
    }
    await audit(trx, accountId, actor, 'webhook_endpoint.updated', id, { ...patch }, now)
    return row
  })
}

export async function removeEndpoint(deps: WebhookActionsDeps, accountId: string, id: string, actor: Actor, now: Date) {
  await inTransaction(deps.db, async (trx) => {
    const endpoint = await requireEndpoint(trx, accountId, id)
    if (!(await deleteEndpoint(trx, accountId, id))) {
      throw notFound()
    }
    await audit(trx, accountId, actor, 'webhook_endpoint.deleted', id, { url: endpoint.url }, now)
  })
}

/** A new signing secret; the old one keeps signing for `overlapSeconds` (0: stops now). */
export async function rollSecret(
  deps: WebhookActionsDeps,
  accountId: string,
  id: string,
  overlapSeconds: number,
  actor: Actor,
  now: Date,
  within?: (trx: Trx, rolled: EndpointWithSecret) => Promise<void>,
): Promise<EndpointWithSecret> {
  const secret = newWebhookSecret()
  const endpoint = await inTransaction(deps.db, async (trx) => {
    const row = await rollEndpointSecret(trx, accountId, id, encryptSecret(secret, deps.secretKey), overlapSeconds, now)
    if (!row) {
      throw notFound()
    }
    await audit(
      trx,
      accountId,
      actor,
      'webhook_endpoint.secret_rolled',
      id,
      { expire_old_in_seconds: overlapSeconds },
      now,
    )
    await within?.(trx, { endpoint: row, secret })
    return row
  })
  return { endpoint, secret }
}

/** The current signing secret in clear, for a signed-in person: always audited. */
export async function revealEndpointSecret(
  deps: WebhookActionsDeps,
  accountId: string,
  id: string,
  actor: AuditActor,
  now: Date,
): Promise<string> {
  return inTransaction(deps.db, async (trx) => {
    const row = await requireEndpoint(trx, accountId, id)
    await recordAudit(
      trx,
      accountId,
      { action: 'webhook_endpoint.secret_revealed', targetId: id, actor, detail: {} },
      now,
    )
    return revealSecret(row, deps.secretKey)
  })
}

/** Queues a `webhook.test` event to the endpoint (202): refused while the endpoint is disabled. */
export async function sendTestEvent(
  deps: WebhookActionsDeps,
  accountId: string,
  id: string,
  actor: Actor,
  now: Date,
  within?: (trx: Trx, delivery: DeliveryRow) => Promise<void>,
): Promise<DeliveryRow> {
  return inTransaction(deps.db, async (trx) => {
    await enabledEndpoint(trx, accountId, id)
    const delivery = await insertTestDelivery(trx, accountId, id, now)
    await audit(trx, accountId, actor, 'webhook_endpoint.test_sent', id, { delivery_id: delivery.id }, now)
    await within?.(trx, delivery)
    return delivery
  })
}

/** One more attempt of a delivery, now (202): refused while its endpoint is disabled. */
export async function retryEndpointDelivery(
  deps: WebhookActionsDeps,
  accountId: string,
  endpointId: string,
  deliveryId: string,
  actor: Actor,
  now: Date,
  within?: (trx: Trx, delivery: DeliveryRow) => Promise<void>,
): Promise<DeliveryRow> {
  return inTransaction(deps.db, async (trx) => {
    await enabledEndpoint(trx, accountId, endpointId)
    const delivery = await findDelivery(trx, accountId, endpointId, deliveryId)
    if (!delivery) {
      throw new AppError('not_found', 'No delivery with this id exists for this endpoint.')
    }
    const retried = await retryDelivery(trx, delivery, now)
    await audit(trx, accountId, actor, 'webhook_delivery.retried', deliveryId, { endpoint_id: endpointId }, now)
    await within?.(trx, retried)
    return retried
  })
}

export interface RecoveryRange {
  since: string
  /** Default: now. */
  until?: string | undefined
}

export interface Recovery {
  since: string
  until: string
  queued: number
}

/**
 * Every `failed` delivery of the endpoint created in [since, until) is attempted once more, now (202):
 * refused while the endpoint is disabled, and for a range that starts in the future or ends before it
 * starts (`until` may be later than now: nothing is created there yet).
 */
export async function recoverEndpointDeliveries(
  deps: WebhookActionsDeps,
  accountId: string,
  endpointId: string,
  range: RecoveryRange,
  actor: Actor,
  now: Date,
  within?: (trx: Trx, recovery: Recovery) => Promise<void>,
): Promise<Recovery> {
  const since = Date.parse(range.since)
  const until = range.until === undefined ? now.getTime() : Date.parse(range.until)
  // RFC 3339 allows a leap second (23:59:60), which no clock here can stand for.
  for (const [field, ms] of [
    ['since', since],
    ['until', until],
  ] as const) {
    if (!Number.isFinite(ms)) {
      throw invalidParameter(field, 'must be a time without a leap second (:60)')
    }
  }
  if (since > now.getTime()) {
    throw invalidParameter('since', 'must not be in the future')
  }
  if (until <= since) {
    throw invalidParameter('until', 'must be later than since')
  }
  return inTransaction(deps.db, async (trx) => {
    await enabledEndpoint(trx, accountId, endpointId)
    const bounds = { since: new Date(since).toISOString(), until: new Date(until).toISOString() }
    const recovery = { ...bounds, queued: await recoverDeliveries(trx, accountId, endpointId, bounds, now) }
    await audit(trx, accountId, actor, 'webhook_endpoint.recovered', endpointId, { ...recovery }, now)
    await within?.(trx, recovery)
    return recovery
  })
}

/** The account's endpoint, or not_found: another account's endpoint is no different from a missing one. */
export async function requireEndpoint(db: Db, accountId: string, id: string): Promise<EndpointRow> {
  const endpoint = await findEndpoint(db, accountId, id)
  if (!endpoint) {
    throw notFound()
  }
  return endpoint
}

async function enabledEndpoint(trx: Trx, accountId: string, id: string): Promise<EndpointRow> {
  const endpoint = await requireEndpoint(trx, accountId, id)
  if (endpoint.status !== 'enabled') {
    throw new AppError('endpoint_disabled', 'The endpoint is disabled: enable it (PATCH status) to send to it.')
  }
  return endpoint
}

async function checkedUrl(deps: WebhookActionsDeps, raw: string): Promise<string> {
  const check = await checkWebhookUrl(raw, { allowPrivate: deps.allowPrivateUrls, resolve: deps.resolve })
  if (!check.ok) {
    throw invalidParameter('url', check.reason)
  }
  return check.url.href
}

function checkEvents(events: readonly string[] | undefined): void {
  const problem = eventsProblem(events)
  if (problem !== undefined) {
    throw invalidParameter('events', problem)
  }
}

const notFound = () => new AppError('not_found', 'No webhook endpoint with this id exists in this account.')

async function audit(
  trx: Trx,
  accountId: string,
  actor: Actor,
  action: AuditAction,
  targetId: string,
  detail: Record<string, unknown>,
  now: Date,
): Promise<void> {
  if (actor !== undefined) {
    await recordAudit(trx, accountId, { action, targetId, actor, detail }, now)
  }
}
