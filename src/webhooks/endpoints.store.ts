// Tenant-scoped webhook endpoint storage. Secrets stay encrypted; only liveSecrets and revealSecret decrypt.
import { sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Db, Trx } from '../db/transaction.js'
import type { PageRow } from '../http/pagination.js'
import { newId } from '../lib/ids.js'
import { type CreateEndpointInput, type PatchEndpointInput, toEndpoint } from './endpoints.js'
import { decryptSecret } from './secrets.js'
import type { WebhookEndpointsTable } from './webhooks.table.js'

export type EndpointRow = WebhookEndpointsTable

/** The account's endpoints, counted under its row's lock on PostgreSQL: two creates cannot both pass the cap. */
export async function countEndpointsForCreate(trx: Trx, accountId: string): Promise<number> {
  if (dialectOf(trx) === 'postgres') {
    await sql`select 1 from accounts where id = ${accountId} for update`.execute(trx)
  }
  const row = await trx
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function insertEndpoint(
  trx: Trx,
  accountId: string,
  input: CreateEndpointInput & { url: string },
  encryptedSecret: string,
  now: Date,
): Promise<EndpointRow> {
  const at = now.toISOString()
  const row: EndpointRow = {
    account_id: accountId,
    id: newId('webhookEndpoint', now.getTime()),
    url: input.url,
    description: input.description ?? null,
    events: JSON.stringify(input.events ?? ['*']),
    status: 'enabled',
    disabled_reason: null,
    secret: encryptedSecret,
    previous_secret: null,
    previous_secret_expires_at: null,
    failing_since: null,
    due_at: null,
    created_at: at,
    updated_at: at,
  }
  await trx.insertInto('webhook_endpoints').values(row).execute()
  return row
}

export async function findEndpoint(db: Db, accountId: string, id: string): Promise<EndpointRow | undefined> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
}

export async function listEndpointRows(
  db: Db,
  accountId: string,
  { afterId, fetch }: { afterId: string | undefined; fetch: number },
): Promise<PageRow[]> {
  let query = db.selectFrom('webhook_endpoints').selectAll().where('account_id', '=', accountId)
  if (afterId !== undefined) {
    query = query.where('id', '>', afterId)
  }
  const rows = await query.orderBy('id').limit(fetch).execute()
  return rows.map((row) => ({ id: row.id, body: JSON.stringify(toEndpoint(row)) }))
}

/**
 * Applies a PATCH (url already checked): disabling sets `manual` and ends pending deliveries as failed;
 * enabling clears the reason and the failure run. Undefined when the account has no such endpoint.
 */
export async function updateEndpoint(
  trx: Trx,
  accountId: string,
  id: string,
  patch: PatchEndpointInput,
  now: Date,
): Promise<EndpointRow | undefined> {
  const current = await findEndpoint(trx, accountId, id)
  if (!current) {
    return undefined
  }
  const next: EndpointRow = {
    ...current,
    url: patch.url ?? current.url,
    description: patch.description === undefined ? current.description : patch.description,
    events: patch.events === undefined ? current.events : JSON.stringify(patch.events),
    updated_at: now.toISOString(),
  }
  if (patch.status === 'disabled' && current.status === 'enabled') {
    Object.assign(next, { status: 'disabled', disabled_reason: 'manual', due_at: null })
  } else if (patch.status === 'enabled' && current.status === 'disabled') {
    Object.assign(next, { status: 'enabled', disabled_reason: null, failing_since: null })
  }
  const { account_id: _a, id: _i, ...changes } = next
  await setEndpointColumns(trx, accountId, id, changes)
  if (next.status === 'disabled' && current.status === 'enabled') {
    await failPendingDeliveries(trx, accountId, id)
  }
  return next
}

export async function setEndpointColumns(
  trx: Trx,
  accountId: string,
  id: string,
  changes: Partial<Omit<EndpointRow, 'account_id' | 'id'>>,
): Promise<void> {
  await trx
    .updateTable('webhook_endpoints')
    .set(changes)
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .execute()
}

/** Deletes the endpoint and (cascade) its deliveries; false when the account has no such endpoint. */
export async function deleteEndpoint(trx: Trx, accountId: string, id: string): Promise<boolean> {
  // Deliveries first: SQLite enforces the cascade only with foreign keys on, and this is explicit either way.
  await trx.deleteFrom('webhook_deliveries').where('account_id', '=', accountId).where('endpoint_id', '=', id).execute()
  const result = await trx
    .deleteFrom('webhook_endpoints')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

/** Replaces the signing secret; the old one keeps signing for `overlapSeconds` (0: stops at once). */
export async function rollEndpointSecret(
  trx: Trx,
  accountId: string,
  id: string,
  encryptedSecret: string,
  overlapSeconds: number,
  now: Date,
): Promise<EndpointRow | undefined> {
  const current = await findEndpoint(trx, accountId, id)
  if (!current) {
    return undefined
  }
  const overlap = overlapSeconds > 0
  const changes = {
    secret: encryptedSecret,
    previous_secret: overlap ? current.secret : null,
    previous_secret_expires_at: overlap ? new Date(now.getTime() + overlapSeconds * 1000).toISOString() : null,
    updated_at: now.toISOString(),
  }
  await setEndpointColumns(trx, accountId, id, changes)
  return { ...current, ...changes }
}

/**
 * The secrets a delivery is signed with now. Throws if the current one cannot be decrypted (SECRET
 * changed); a previous one that cannot be is left out, so a roll repairs the endpoint.
 */
export function liveSecrets(row: EndpointRow, key: Buffer, now: Date): string[] {
  const secrets = [decryptSecret(row.secret, key)]
  if (
    row.previous_secret !== null &&
    row.previous_secret_expires_at !== null &&
    row.previous_secret_expires_at > now.toISOString()
  ) {
    try {
      secrets.push(decryptSecret(row.previous_secret, key))
    } catch {
      // sealed under another SECRET: the current secret signs alone
    }
  }
  return secrets
}

/** The current signing secret in clear (the web app's reveal, which audits it). */
export const revealSecret = (row: EndpointRow, key: Buffer): string => decryptSecret(row.secret, key)

/**
 * Disables an endpoint for a delivery outcome (`gone`, `failing`) and ends its pending deliveries
 * as failed. Only an enabled endpoint changes: a reason set meanwhile (by PATCH) stays.
 */
export async function disableEndpoint(
  trx: Trx,
  accountId: string,
  id: string,
  reason: 'gone' | 'failing',
  now: Date,
): Promise<boolean> {
  const result = await trx
    .updateTable('webhook_endpoints')
    .set({ status: 'disabled', disabled_reason: reason, due_at: null, updated_at: now.toISOString() })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('status', '=', 'enabled')
    .executeTakeFirst()
  if (Number(result.numUpdatedRows) === 0) {
    return false
  }
  await failPendingDeliveries(trx, accountId, id)
  return true
}

/** Ends a disabled endpoint's deliveries still to be sent as failed; an attempt under way records its own. */
export async function failPendingDeliveries(trx: Trx, accountId: string, endpointId: string): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', next_attempt_at: null })
    .where('account_id', '=', accountId)
    .where('endpoint_id', '=', endpointId)
    .where('next_attempt_at', 'is not', null)
    .execute()
}
