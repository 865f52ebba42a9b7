// Settings → "API & Webhooks" under /app/:accountId/settings/api: list, create, revoke, roll keys.
// Keys issued here are the same keys the API and the CLI accept.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Transaction } from 'kysely'
import { FULL_SCOPES, READ_ONLY_SCOPES } from '../api-keys/api-key.js'
import {
  expireApiKeyAt,
  findApiKey,
  issueApiKey,
  listApiKeys,
  listKeyUsage,
  revokeApiKey,
} from '../api-keys/api-keys.store.js'
import { type AuditEntry, KEY_CHANGES_PER_HOUR, keyChangeRetryAfter, listAudit, recordAudit } from '../audit/audit.js'
import type { Database } from '../db/schema.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { formValues } from './forms.js'
import {
  apiSettingsPage,
  EXPIRY_CHOICES,
  type KeyRow,
  keyCreatedPage,
  OVERLAP_CHOICES,
  revokeConfirmPage,
  USAGE_DAYS,
} from './pages/api-settings-page.js'
import type { Render } from './render.js'
import { accountContext as accountPage } from './request-context.js'

const HOUR = 3600 * 1000
const DURATIONS: Record<string, number> = {
  now: 0,
  '1h': HOUR,
  '24h': 24 * HOUR,
  '7d': 7 * 24 * HOUR,
  '30d': 30 * 24 * HOUR,
  '90d': 90 * 24 * HOUR,
  '365d': 365 * 24 * HOUR,
}
const NOTICES: Record<string, string> = { revoked: 'The key was revoked.' }

export async function apiSettingsRoutes(
  app: FastifyInstance,
  { deps, render }: { deps: Deps; render: Render },
): Promise<void> {
  const { db } = deps.database
  const prefix = deps.config.keyPrefix

  const lastDays = (now: Date) =>
    Array.from({ length: USAGE_DAYS }, (_, i) =>
      new Date(now.getTime() - (USAGE_DAYS - 1 - i) * 24 * HOUR).toISOString().slice(0, 10),
    )

  async function keyRows(accountId: string, now: Date): Promise<{ rows: KeyRow[]; days: string[] }> {
    const days = lastDays(now)
    const [keys, usage] = await Promise.all([
      listApiKeys(db, accountId, prefix),
      listKeyUsage(db, accountId, days[0] ?? ''),
    ])
    const counts = new Map(usage.map((u) => [`${u.key_id}|${u.day}`, Number(u.requests)]))
    // Newest first: the key just created or rolled is at the top.
    const rows = keys.reverse().map((key) => ({ key, usage: days.map((day) => counts.get(`${key.id}|${day}`) ?? 0) }))
    return { rows, days }
  }

  /** What the settings page shows: keys with their daily requests, and the recent key activity. */
  async function pageData(accountId: string, now: Date) {
    const [{ rows, days }, activity] = await Promise.all([keyRows(accountId, now), listAudit(db, accountId, 10)])
    return { accountId, keys: rows, days, now, activity }
  }

  async function findKeyOr404(accountId: string, keyId: string) {
    const found = await findApiKey(db, accountId, keyId, prefix)
    if (!found) {
      throw new AppError('not_found', 'No such key in this account.')
    }
    return found
  }

  /**
   * A change to the account's keys and its audit entry, in one transaction, within the account's
   * hourly budget of key changes (429 beyond it, nothing changed).
   */
  async function changeKeys<T>(
    request: FastifyRequest,
    now: Date,
    change: (trx: Transaction<Database>, now: Date) => Promise<{ result: T; audit: Omit<AuditEntry, 'actor'> }>,
  ): Promise<T> {
    const { account, user } = accountPage(request)
    const wait = await keyChangeRetryAfter(db, account.id, now)
    if (wait > 0) {
      throw new AppError(
        'rate_limited',
        `This account has made ${KEY_CHANGES_PER_HOUR} key changes in the last hour; try again in ${Math.ceil(wait / 60)} min.`,
        { headers: { 'retry-after': String(wait) } },
      )
    }
    return db.transaction().execute(async (trx) => {
      const { result, audit } = await change(trx, now)
      await recordAudit(trx, account.id, { ...audit, actor: { userId: user.id, ip: request.ip } }, now)
      return result
    })
  }

  /** The key is revoked already; a lost push only delays other instances by their cache TTL. */
  async function pushRevocation(request: FastifyRequest, keyId: string, keyHash: string): Promise<void> {
    if (!(await deps.keyRevocations.publish(keyHash))) {
      request.log.warn({ keyId }, 'revocation push failed: other instances refuse the key within their cache TTL')
    }
  }

  app.get('/settings/api', async (request, reply) => {
    const { account } = accountPage(request)
    const now = deps.clock.now()
    const notice = NOTICES[(request.query as { notice?: string }).notice ?? '']
    const data = await pageData(account.id, now)
    return render(request, reply, (c) => apiSettingsPage(c, { ...data, ...(notice ? { notice } : {}) }))
  })

  app.post('/settings/api/keys', async (request, reply) => {
    const { account } = accountPage(request)
    const values = formValues(request, ['name', 'scope', 'expires'])
    const name = values.name.trim()
    const now = deps.clock.now()
    if (
      name.length === 0 ||
      name.length > 100 ||
      !(values.expires in EXPIRY_CHOICES) ||
      !['full', 'read'].includes(values.scope)
    ) {
      const data = await pageData(account.id, now)
      const error =
        name.length === 0 || name.length > 100
          ? 'Give the key a name of 1 to 100 characters.'
          : 'Choose the access and expiry from the lists.'
      return render(request, reply, (c) => apiSettingsPage(c, { ...data, values: { name: values.name }, error }), 400)
    }
    const duration = DURATIONS[values.expires]
    const { apiKey, secret } = await changeKeys(request, now, async (trx) => {
      const issued = await issueApiKey(trx, account.id, {
        name,
        scopes: values.scope === 'read' ? READ_ONLY_SCOPES : FULL_SCOPES,
        expiresAt: values.expires === 'never' || duration === undefined ? null : new Date(now.getTime() + duration),
        now,
        prefix,
      })
      const { id, scopes, expires_at } = issued.apiKey
      return {
        result: issued,
        audit: { action: 'api_key.created', targetId: id, detail: { name, scopes, expires_at } },
      }
    })
    // Rendered, not redirected to: the secret must never be reachable by a GET.
    return render(request, reply, (c) => keyCreatedPage(c, { accountId: account.id, key: apiKey, secret }), 201)
  })

  app.get('/settings/api/keys/:keyId/revoke', async (request, reply) => {
    const { account } = accountPage(request)
    const { apiKey } = await findKeyOr404(account.id, (request.params as { keyId: string }).keyId)
    const { rows } = await keyRows(account.id, deps.clock.now())
    const requests = rows.find((r) => r.key.id === apiKey.id)?.usage.reduce((a, b) => a + b, 0) ?? 0
    return render(request, reply, (c) => revokeConfirmPage(c, { accountId: account.id, key: apiKey, requests }))
  })

  app.post('/settings/api/keys/:keyId/revoke', async (request, reply) => {
    const { account } = accountPage(request)
    const { apiKey, keyHash } = await findKeyOr404(account.id, (request.params as { keyId: string }).keyId)
    if (apiKey.revoked_at === null) {
      await changeKeys(request, deps.clock.now(), async (trx, now) => {
        await revokeApiKey(trx, account.id, apiKey.id, now)
        return {
          result: null,
          audit: { action: 'api_key.revoked', targetId: apiKey.id, detail: { name: apiKey.name } },
        }
      })
    }
    await pushRevocation(request, apiKey.id, keyHash)
    return reply.redirect(`/app/${account.id}/settings/api?notice=revoked`, 303)
  })

  app.post('/settings/api/keys/:keyId/roll', async (request, reply) => {
    const { account } = accountPage(request)
    const { apiKey: old, keyHash } = await findKeyOr404(account.id, (request.params as { keyId: string }).keyId)
    const { overlap } = formValues(request, ['overlap'])
    const duration = overlap in OVERLAP_CHOICES ? DURATIONS[overlap] : undefined
    if (duration === undefined || old.revoked_at !== null) {
      throw new AppError('not_found', 'This key cannot be rolled.')
    }
    const { apiKey, secret } = await changeKeys(request, deps.clock.now(), async (trx, now) => {
      const oldExpiresAt = new Date(now.getTime() + duration)
      await expireApiKeyAt(trx, account.id, old.id, oldExpiresAt)
      const issued = await issueApiKey(trx, account.id, {
        name: old.name,
        scopes: old.scopes,
        expiresAt: null,
        now,
        prefix,
      })
      const detail = { name: old.name, new_key_id: issued.apiKey.id, old_key_expires_at: oldExpiresAt.toISOString() }
      return { result: issued, audit: { action: 'api_key.rolled', targetId: old.id, detail } }
    })
    await pushRevocation(request, old.id, keyHash)
    const rolledFrom = (await findKeyOr404(account.id, old.id)).apiKey
    return render(
      request,
      reply,
      (c) => keyCreatedPage(c, { accountId: account.id, key: apiKey, secret, rolledFrom }),
      201,
    )
  })
}
