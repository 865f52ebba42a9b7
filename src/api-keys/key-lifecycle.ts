// Issuing, revoking and rolling API keys, for the command line and the web app alike: each change
// commits with its audit entry, then a key taken out is pushed to every instance's cache
// (docs/design.md#authentication).
import type { Kysely } from 'kysely'
import { tenantById } from '../accounts/tenant.js'
import { type AuditActor, recordAudit } from '../audit/audit.js'
import type { Database } from '../db/schema.js'
import { inTransaction, type OnCommit, type Trx } from '../db/transaction.js'
import { eventBody, KEY_EXPOSED, newEvent } from '../events/events.js'
import { insertEvents } from '../events/events.store.js'
import type { FeedCommits } from '../events/feed-commits.js'
import { AppError } from '../http/errors.js'
import { isMemberNow } from '../users/users.store.js'
import type { Scope } from './api-key.js'
import { toApiKeyObject } from './api-key.schemas.js'
import {
  type ApiKey,
  expireApiKeyAt,
  issueApiKey,
  listActiveKeysCreatedBy,
  markKeyExposed,
  revokeApiKey,
  type StoredApiKey,
} from './api-keys.store.js'
import type { KeyRevocations } from './key-revocations.js'

/** The longest key name, in characters, wherever a key is named (the web form, the CLI's --name). */
export const KEY_NAME_MAX = 100

/** What a key change uses; the composition root's Deps is one. */
export interface KeyLifecycleDeps {
  readonly database: { readonly db: Kysely<Database> }
  readonly config: { readonly keyPrefix: string }
  readonly keyRevocations: Pick<KeyRevocations, 'publish'>
  /** Wakes the account's long polls once an api_key.exposed event is committed. */
  readonly feedCommits?: Pick<FeedCommits, 'committed'>
}

export interface NewKey {
  name: string
  scopes: Scope[]
  expiresAt: Date | null
}

export interface IssuedKey {
  apiKey: ApiKey
  /** The key itself, to be shown this once: only its digest is stored. */
  secret: string
}

/** Whether the other instances heard of it; when not, the change stands and their cache TTL bounds the delay. */
export interface Pushed {
  pushed: boolean
}

export async function issueKey(
  deps: KeyLifecycleDeps,
  accountId: string,
  key: NewKey,
  actor: AuditActor,
  now: Date,
): Promise<IssuedKey> {
  return inTransaction(deps.database.db, (trx) => issueKeyIn(trx, accountId, key, actor, now, deps.config.keyPrefix))
}

/** The same inside the caller's transaction: an account's first key is issued with the account. */
export async function issueKeyIn(
  trx: Trx,
  accountId: string,
  key: NewKey,
  actor: AuditActor,
  now: Date,
  keyPrefix: string,
): Promise<IssuedKey> {
  await refuseFormerMember(trx, accountId, actor)
  const issued = await issueApiKey(trx, accountId, { ...key, now, prefix: keyPrefix, createdBy: actor?.userId ?? null })
  const { id, name, scopes, expires_at } = issued.apiKey
  const detail = { name, scopes, expires_at }
  await recordAudit(trx, accountId, { action: 'api_key.created', targetId: id, actor, detail }, now)
  return issued
}

/** Revokes and pushes. Idempotent: a key revoked already keeps its first revocation and entry, but is pushed again. */
export async function revokeKey(
  deps: KeyLifecycleDeps,
  key: StoredApiKey,
  actor: AuditActor,
  now: Date,
): Promise<Pushed> {
  const push = await inTransaction(deps.database.db, (trx, onCommit) =>
    revokeKeyIn(trx, onCommit, deps, key, actor, now),
  )
  return { pushed: push.sent }
}

/** The same inside the caller's transaction; `why` (reason, source) goes into the audit entry's detail. */
async function revokeKeyIn(
  trx: Trx,
  onCommit: OnCommit,
  deps: KeyLifecycleDeps,
  { apiKey, keyHash }: StoredApiKey,
  actor: AuditActor,
  now: Date,
  why?: { reason: string; source?: string },
): Promise<{ sent: boolean }> {
  if (await revokeApiKey(trx, apiKey.account_id, apiKey.id, now)) {
    const detail = { name: apiKey.name, ...why }
    await recordAudit(trx, apiKey.account_id, { action: 'api_key.revoked', targetId: apiKey.id, actor, detail }, now)
  }
  return pushAfterCommit(deps, onCommit, keyHash)
}

/**
 * When a person leaves an account, the keys they created there (either mode) that still work: each
 * revoked, unless the owner named it in `keep`; each decision audited with the reason
 * `creator_removed`. Returns each revocation with whether its push reached the other instances.
 */
export async function endKeysOfRemovedPerson(
  trx: Trx,
  onCommit: OnCommit,
  deps: KeyLifecycleDeps,
  removal: { accountId: string; userId: string; keep: ReadonlySet<string> },
  actor: AuditActor,
  now: Date,
): Promise<Array<{ keyId: string; push: { sent: boolean } }>> {
  const reason = 'creator_removed'
  const keys = await listActiveKeysCreatedBy(trx, removal.accountId, removal.userId, deps.config.keyPrefix, now)
  const pushes: Array<{ keyId: string; push: { sent: boolean } }> = []
  for (const key of keys) {
    const { id, account_id: accountId, name } = key.apiKey
    if (removal.keep.has(id)) {
      await recordAudit(trx, accountId, { action: 'api_key.kept', targetId: id, actor, detail: { name, reason } }, now)
    } else {
      pushes.push({ keyId: id, push: await revokeKeyIn(trx, onCommit, deps, key, actor, now, { reason }) })
    }
  }
  return pushes
}

/** A person removed from the account meanwhile (their request passed the check before): 404, nothing issued. */
async function refuseFormerMember(trx: Trx, accountId: string, actor: AuditActor): Promise<void> {
  if (actor !== null && !(await isMemberNow(trx, tenantById(accountId).accountId, actor.userId))) {
    throw new AppError('not_found', 'No such account.')
  }
}

/** Where a leaked key was found, as a secret-scanning report or an operator tells it. */
export interface Exposure {
  /** The URL where it was found ('' when not given). */
  url: string
  /** Who found it: the report's `source` (a GitHub repository, a gist…) or `operator`. */
  source: string
}

/**
 * A key reported found in public: recorded for the account's banner and audited, then revoked
 * (SECRET_SCANNING_ACTION=revoke) or only flagged (notify), and pushed out after the commit.
 */
export async function reportExposedKey(
  deps: KeyLifecycleDeps,
  key: StoredApiKey,
  exposure: Exposure,
  action: 'revoke' | 'notify',
  now: Date,
): Promise<Pushed> {
  const push = await inTransaction(deps.database.db, async (trx, onCommit) => {
    const { id, account_id: accountId, name } = key.apiKey
    await markKeyExposed(trx, accountId, id, exposure.url, now)
    const detail = { name, url: exposure.url, source: exposure.source, action }
    await recordAudit(trx, accountId, { action: 'api_key.exposed', targetId: id, actor: null, detail }, now)
    const push =
      action === 'revoke'
        ? await revokeKeyIn(trx, onCommit, deps, key, null, now, { reason: 'exposed', source: exposure.source })
        : { sent: false }
    // After the revocation, so the event's key says it is revoked; webhooks that subscribe get it.
    const { livemode } = tenantById(accountId)
    const at = now.toISOString()
    const keyNow = {
      ...key.apiKey,
      revoked_at: action === 'revoke' ? (key.apiKey.revoked_at ?? at) : key.apiKey.revoked_at,
    }
    const event = newEvent(KEY_EXPOSED, at, livemode, { source_url: exposure.url })
    await insertEvents(trx, accountId, at, KEY_EXPOSED, [
      [event.id, eventBody(event, JSON.stringify(toApiKeyObject(keyNow, livemode)))],
    ])
    onCommit(() => deps.feedCommits?.committed(accountId))
    return push
  })
  return { pushed: push.sent }
}

/**
 * Rolls the key: a new key with its name and scopes, while the old one expires `overlapMs` from
 * now (0: at once) and is pushed out. One audit entry, on the old key, names the new one.
 */
export async function rollKey(
  deps: KeyLifecycleDeps,
  { apiKey: old, keyHash }: StoredApiKey,
  overlapMs: number,
  actor: AuditActor,
  now: Date,
): Promise<IssuedKey & Pushed> {
  const { issued, push } = await inTransaction(deps.database.db, async (trx, onCommit) => {
    await refuseFormerMember(trx, old.account_id, actor)
    // Registered first: it runs once the whole roll has committed, and not at all if any step fails.
    const push = pushAfterCommit(deps, onCommit, keyHash)
    const oldExpiresAt = new Date(now.getTime() + overlapMs)
    await expireApiKeyAt(trx, old.account_id, old.id, oldExpiresAt)
    const issued = await issueApiKey(trx, old.account_id, {
      name: old.name,
      scopes: old.scopes,
      expiresAt: null,
      now,
      prefix: deps.config.keyPrefix,
      createdBy: actor?.userId ?? null,
    })
    const detail = { name: old.name, new_key_id: issued.apiKey.id, old_key_expires_at: oldExpiresAt.toISOString() }
    await recordAudit(trx, old.account_id, { action: 'api_key.rolled', targetId: old.id, actor, detail }, now)
    return { issued, push }
  })
  return { ...issued, pushed: push.sent }
}

/** A revocation other instances did not hear of: they refuse the key once their cache entry expires. */
export function warnIfNotPushed(log: { warn(details: object, message: string): void }, keyId: string, pushed: boolean) {
  if (!pushed) {
    log.warn({ keyId }, 'revocation push failed: other instances refuse the key within their cache TTL')
  }
}

/** Registers the push of a key's revocation; `sent` tells how it went once the transaction returns. */
function pushAfterCommit(deps: KeyLifecycleDeps, onCommit: OnCommit, keyHash: string): { sent: boolean } {
  const push = { sent: false }
  onCommit(async () => {
    push.sent = await deps.keyRevocations.publish(keyHash)
  })
  return push
}
