// API key storage, tenant-scoped but for the lookups by digest (how a request finds its tenant) and
// by id (the CLI). Changes with their audit entry and revocation push: key-lifecycle.ts.
import type { Kysely } from 'kysely'
import { liveTenant, type Tenant, tenantById, testTenant } from '../accounts/tenant.js'
import type { Database } from '../db/schema.js'
import { newId } from '../lib/ids.js'
import { generateApiKey, hashApiKey, parseStoredScopes, redactApiKey, type Scope } from './api-key.js'
import type { ApiKeysTable } from './api-keys.table.js'

export interface ApiKey {
  id: string
  account_id: string
  name: string
  /** `service_live_…` (or `_test_`) + last 4: never the key. */
  redacted: string
  scopes: Scope[]
  created_at: string
  expires_at: string | null
  revoked_at: string | null
  last_used_at: string | null
  /** The person who created it; null when made on the command line. */
  created_by_user_id: string | null
  /** When a leaked-key report first named it, and where it was found. */
  exposed_at: string | null
  exposed_url: string | null
}

/** A key with its digest, by which every instance's verification cache knows it. */
export interface StoredApiKey {
  apiKey: ApiKey
  keyHash: string
}

export interface IssueApiKeyInput {
  name: string
  scopes: Scope[]
  expiresAt: Date | null
  now: Date
  prefix: string
  createdBy: string | null
}

export async function issueApiKey(
  db: Kysely<Database>,
  accountId: string,
  input: IssueApiKeyInput,
): Promise<{ apiKey: ApiKey; secret: string }> {
  const secret = generateApiKey(input.prefix, tenantById(accountId).livemode)
  const row: ApiKeysTable = {
    account_id: accountId,
    id: newId('apiKey'),
    name: input.name,
    key_hash: hashApiKey(secret),
    last4: secret.slice(-4),
    scopes: JSON.stringify(input.scopes),
    created_at: input.now.toISOString(),
    expires_at: input.expiresAt?.toISOString() ?? null,
    revoked_at: null,
    last_used_at: null,
    created_by_user_id: input.createdBy,
    exposed_at: null,
    exposed_url: null,
  }
  await db.insertInto('api_keys').values(row).execute()
  return { apiKey: toApiKey(row, input.prefix), secret }
}

export interface KeyWithAccount {
  key: ApiKey
  /** The account as the API names it, whatever the key's mode. */
  account: { id: string; name: string; created_at: string }
  /** Whose data the key acts on: the account in the key's mode. */
  tenant: Tenant
}

/** The verification lookup: by digest, with its account, whatever its state (the caller checks). */
export async function findKeyByHash(
  db: Kysely<Database>,
  keyHash: string,
  prefix: string,
): Promise<KeyWithAccount | undefined> {
  const row = await db
    .selectFrom('api_keys')
    .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
    .selectAll('api_keys')
    .select(['accounts.name as account_name', 'accounts.created_at as account_created_at'])
    .where('api_keys.key_hash', '=', keyHash)
    .executeTakeFirst()
  if (!row) {
    return undefined
  }
  const tenant = tenantById(row.account_id)
  return {
    key: toApiKey(row, prefix),
    account: { id: tenant.accountId, name: row.account_name, created_at: row.account_created_at },
    tenant,
  }
}

export async function listApiKeys(db: Kysely<Database>, accountId: string, prefix: string): Promise<ApiKey[]> {
  const rows = await db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).orderBy('id').execute()
  return rows.map((row) => toApiKey(row, prefix))
}

/** The keys of the account (either mode) that this person created and that still work. */
export async function listActiveKeysCreatedBy(
  db: Kysely<Database>,
  accountId: string,
  userId: string,
  prefix: string,
  now: Date,
): Promise<StoredApiKey[]> {
  const keys: StoredApiKey[] = []
  // One query per mode: each names a single tenant, as every tenant statement does (Citus routing).
  for (const tenant of [liveTenant(accountId), testTenant(accountId)]) {
    const rows = await db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', tenant.id)
      .where('created_by_user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now.toISOString())]))
      .orderBy('id')
      .execute()
    keys.push(...rows.map((row) => ({ apiKey: toApiKey(row, prefix), keyHash: row.key_hash })))
  }
  return keys
}

/** Finds a key by id alone: for the CLI, where an operator names a key without its account. */
export async function findApiKeyById(
  db: Kysely<Database>,
  keyId: string,
  prefix: string,
): Promise<StoredApiKey | undefined> {
  const row = await db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst()
  return row ? { apiKey: toApiKey(row, prefix), keyHash: row.key_hash } : undefined
}

/**
 * Revokes now. Idempotent: a revoked key keeps its first revocation time. True when this call
 * revoked it, false when it was revoked already (or is not this account's).
 */
export async function revokeApiKey(
  db: Kysely<Database>,
  accountId: string,
  keyId: string,
  now: Date,
): Promise<boolean> {
  const result = await db
    .updateTable('api_keys')
    .set({ revoked_at: now.toISOString() })
    .where('account_id', '=', accountId)
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

export async function findApiKey(
  db: Kysely<Database>,
  accountId: string,
  keyId: string,
  prefix: string,
): Promise<StoredApiKey | undefined> {
  const row = await db
    .selectFrom('api_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', keyId)
    .executeTakeFirst()
  return row ? { apiKey: toApiKey(row, prefix), keyHash: row.key_hash } : undefined
}

/** Records a leaked-key report: the first report's time stays, the latest URL replaces an earlier one. */
export async function markKeyExposed(
  db: Kysely<Database>,
  accountId: string,
  keyId: string,
  url: string,
  now: Date,
): Promise<void> {
  await db
    .updateTable('api_keys')
    .set((eb) => ({ exposed_at: eb.fn.coalesce('exposed_at', eb.val(now.toISOString())), exposed_url: url }))
    .where('account_id', '=', accountId)
    .where('id', '=', keyId)
    .execute()
}

/** Brings a key's expiry forward to `at` (never later than an expiry it already has). */
export async function expireApiKeyAt(db: Kysely<Database>, accountId: string, keyId: string, at: Date): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ expires_at: at.toISOString() })
    .where('account_id', '=', accountId)
    .where('id', '=', keyId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at.toISOString())]))
    .execute()
}

export async function recordKeysLastUsed(
  db: Kysely<Database>,
  uses: Array<{ accountId: string; keyId: string; at: string }>,
): Promise<void> {
  for (const use of uses) {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: use.at })
      .where('account_id', '=', use.accountId)
      .where('id', '=', use.keyId)
      .execute()
  }
}

/** Adds request counts to the per-day totals (one upsert per key and day). */
export async function recordKeyUsage(
  db: Kysely<Database>,
  counts: Array<{ accountId: string; keyId: string; day: string; requests: number }>,
): Promise<void> {
  for (const count of counts) {
    await db
      .insertInto('api_key_usage')
      .values({ account_id: count.accountId, key_id: count.keyId, day: count.day, requests: count.requests })
      .onConflict((oc) =>
        oc.columns(['account_id', 'key_id', 'day']).doUpdateSet((eb) => ({
          requests: eb('api_key_usage.requests', '+', eb.ref('excluded.requests')),
        })),
      )
      .execute()
  }
}

/** Requests per key per day since `fromDay` (YYYY-MM-DD), for one account. */
export async function listKeyUsage(db: Kysely<Database>, accountId: string, fromDay: string) {
  return db
    .selectFrom('api_key_usage')
    .select(['key_id', 'day', 'requests'])
    .where('account_id', '=', accountId)
    .where('day', '>=', fromDay)
    .execute()
}

export function keyState(key: ApiKey, now: Date): 'active' | 'revoked' | 'expired' {
  if (key.revoked_at !== null) {
    return 'revoked'
  }
  if (key.expires_at !== null && key.expires_at <= now.toISOString()) {
    return 'expired'
  }
  return 'active'
}

function toApiKey(row: ApiKeysTable, prefix: string): ApiKey {
  return {
    id: row.id,
    account_id: row.account_id,
    name: row.name,
    redacted: redactApiKey(prefix, row.last4, tenantById(row.account_id).livemode),
    scopes: parseStoredScopes(row.scopes),
    created_at: row.created_at,
    expires_at: row.expires_at,
    revoked_at: row.revoked_at,
    last_used_at: row.last_used_at,
    created_by_user_id: row.created_by_user_id,
    exposed_at: row.exposed_at,
    exposed_url: row.exposed_url,
  }
}
