// Settings → "API & Webhooks": list, create, revoke and roll keys, through api-keys/key-lifecycle.ts
// as the CLI does; each change is the signed-in person's, within their hourly budget of key changes.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import { testDataDeletionSince } from '../accounts/test-data.js'
import { FULL_SCOPES, READ_ONLY_SCOPES } from '../api-keys/api-key.js'
import { type ApiKey, findApiKey, keyState, listApiKeys, listKeyUsage } from '../api-keys/api-keys.store.js'
import { issueKey, KEY_NAME_MAX, revokeKey, rollKey, warnIfNotPushed } from '../api-keys/key-lifecycle.js'
import { KEY_ACTIONS, KEY_ISSUES_PER_HOUR, keyIssueRetryAfter, listAudit } from '../audit/audit.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { can } from '../users/roles.js'
import { userEmails } from '../users/users.store.js'
import { FormBody, formValues } from './forms.js'
import { NoticeQuery, noticeOf } from './notices.js'
import { ACTIVITY_SHOWN } from './pages/activity.js'
import {
  apiSettingsPage,
  EXPIRY_CHOICES,
  type KeyRow,
  keyCreatedPage,
  OVERLAP_CHOICES,
  revokeConfirmPage,
  rollKeyPage,
  rollNowConfirmPage,
  USAGE_DAYS,
} from './pages/api-settings-page.js'
import type { Render } from './render.js'
import { accountContext, auditActorOf } from './request-context.js'
import { createSecretOnce } from './secret-once.js'
import type { CookieOptions } from './session.js'

const HOUR = 3600 * 1000
type ExpiryChoice = keyof typeof EXPIRY_CHOICES
type OverlapChoice = keyof typeof OVERLAP_CHOICES
/** How long each choice of the two lists lasts: a choice added without a duration fails to compile. */
const DURATION_MS = {
  now: 0,
  '1h': HOUR,
  '24h': 24 * HOUR,
  '7d': 7 * 24 * HOUR,
  '30d': 30 * 24 * HOUR,
  '90d': 90 * 24 * HOUR,
  '365d': 365 * 24 * HOUR,
} as const satisfies Record<Exclude<ExpiryChoice, 'never'> | OverlapChoice, number>

/** One of the list's own choices (a prototype name such as `toString` is not). */
const isChoiceOf = <T extends object>(choices: T, value: string): value is Extract<keyof T, string> =>
  Object.hasOwn(choices, value)
const NOTICES = new Map([
  ['revoked', 'The key was revoked.'],
  ['key-shown', 'A new key is shown only once, right after it is created. If it was not copied, roll it.'],
  ['test-data-deleting', 'All test data is being deleted in the background.'],
])

// Inputs that fail their schema are attached, not refused: the handler answers on its page (forms.ts).
const KeyParams = Type.Object({ keyId: Type.String() })
const CreatedQuery = Type.Object({ rolled_from: Type.Optional(Type.String({ maxLength: 100 })) })
const CREATE_KEY_FIELDS = ['name', 'scope', 'expires'] as const
const CreateKeyForm = FormBody(CREATE_KEY_FIELDS)
const RevokeKeyForm = FormBody([])
const ROLL_KEY_FIELDS = ['overlap', 'confirm'] as const
const RollKeyForm = FormBody(ROLL_KEY_FIELDS)

export const apiSettingsRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  const { db } = deps.database
  const prefix = deps.config.keyPrefix
  // A new key is shown once (docs/design.md#web-application).
  const secretOnce = createSecretOnce(deps.secret, cookieOptions)
  const createdPath = (home: string, keyId: string) => `${home}/settings/api/keys/${keyId}/created`

  const lastDays = (now: Date) =>
    Array.from({ length: USAGE_DAYS }, (_, i) =>
      new Date(now.getTime() - (USAGE_DAYS - 1 - i) * 24 * HOUR).toISOString().slice(0, 10),
    )

  async function keyRows(accountId: string, now: Date): Promise<{ rows: KeyRow[]; days: string[] }> {
    const days = lastDays(now)
    // Use is written in batches (key-verifier.ts): this process's pending counts first, so a key used
    // a moment ago does not show "Last used: never" (docs/web-app.md).
    await deps.keyVerifier.flush().catch(() => {})
    const [keys, usage] = await Promise.all([
      listApiKeys(db, accountId, prefix),
      listKeyUsage(db, accountId, days[0] ?? ''),
    ])
    const counts = new Map(usage.map((u) => [`${u.key_id}|${u.day}`, Number(u.requests)]))
    const creators = await userEmails(
      db,
      keys.flatMap((key) => key.created_by_user_id ?? []),
    )
    const createdBy = ({ created_by_user_id: userId }: ApiKey) =>
      userId === null ? 'the command line' : (creators.get(userId) ?? 'a deleted person')
    // Newest first: the key just created or rolled is at the top.
    const rows = keys.reverse().map((key) => ({
      key,
      usage: days.map((day) => counts.get(`${key.id}|${day}`) ?? 0),
      createdBy: createdBy(key),
    }))
    return { rows, days }
  }

  async function pageData(request: FastifyRequest, now: Date) {
    const { tenant, home, role } = accountContext(request)
    const [{ rows, days }, activity, deletingSince] = await Promise.all([
      keyRows(tenant.id, now),
      listAudit(db, tenant.id, ACTIVITY_SHOWN, KEY_ACTIONS),
      tenant.livemode ? undefined : testDataDeletionSince(db, tenant),
    ])
    const mayManage = keyManagement(request)
    const fullAccess = can(role, 'full_keys')
    const testData = tenant.livemode
      ? undefined
      : { mayDelete: can(role, 'test_data'), ...(deletingSince ? { deletingSince } : {}) }
    const manageWebhooks = can(role, 'webhooks')
    return { home, keys: rows, days, now, activity, fullAccess, mayManage, testData, manageWebhooks }
  }

  async function findKeyOr404(accountId: string, keyId: string) {
    const found = await findApiKey(db, accountId, keyId, prefix)
    if (!found) {
      throw new AppError('not_found', 'No such key in this account.')
    }
    return found
  }

  /** Within the person's hourly budget of keys issued (the audit log counts them), or 429 and nothing changes. */
  async function checkKeyIssueBudget(request: FastifyRequest, now: Date): Promise<void> {
    const { tenant, user } = accountContext(request)
    const wait = await keyIssueRetryAfter(db, tenant.id, user.id, now)
    if (wait > 0) {
      throw new AppError(
        'rate_limited',
        `You have issued ${KEY_ISSUES_PER_HOUR} keys in this account in the last hour; try again in ${Math.ceil(wait / 60)} min. Revoking a key is never limited.`,
        { headers: { 'retry-after': String(wait) } },
      )
    }
  }

  /**
   * Which keys this person may roll and revoke: all for owners and admins; for a member only the
   * read-only keys they issued (another's integration may depend on the rest). Page and guard agree.
   */
  function keyManagement(request: FastifyRequest): (key: Pick<ApiKey, 'scopes' | 'created_by_user_id'>) => boolean {
    const { role, user } = accountContext(request)
    if (can(role, 'full_keys')) {
      return () => true
    }
    return (key) => !key.scopes.includes('write') && key.created_by_user_id === user.id
  }

  function refuseMemberUnlessOwnReadOnly(request: FastifyRequest, key: ApiKey): void {
    if (!keyManagement(request)(key)) {
      throw new AppError('insufficient_scope', 'Members can revoke and roll only the read-only keys they created.')
    }
  }

  /** The key is revoked or rolled already; a lost push only delays other instances by their cache TTL. */
  app.get('/settings/api', { schema: { querystring: NoticeQuery }, attachValidation: true }, async (request, reply) => {
    const now = deps.clock.now()
    const notice = noticeOf(NOTICES, request.query.notice)
    const data = await pageData(request, now)
    return render(request, reply, (c) => apiSettingsPage(c, { ...data, ...(notice ? { notice } : {}) }))
  })

  app.post(
    '/settings/api/keys',
    { schema: { body: CreateKeyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const values = formValues(request, CREATE_KEY_FIELDS)
      const name = values.name.trim()
      const now = deps.clock.now()
      const badName = name.length === 0 || name.length > KEY_NAME_MAX
      const expires = values.expires
      if (badName || !isChoiceOf(EXPIRY_CHOICES, expires) || !['full', 'read'].includes(values.scope)) {
        const data = await pageData(request, now)
        const error = badName
          ? `Give the key a name of 1 to ${KEY_NAME_MAX} characters.`
          : 'Choose the access and expiry from the lists.'
        return render(request, reply, (c) => apiSettingsPage(c, { ...data, values: { name: values.name }, error }), 400)
      }
      if (values.scope === 'full') {
        refuseMemberFullAccess(request)
      }
      await checkKeyIssueBudget(request, now)
      const scopes = values.scope === 'read' ? READ_ONLY_SCOPES : FULL_SCOPES
      const expiresAt = expires === 'never' ? null : new Date(now.getTime() + DURATION_MS[expires])
      const { apiKey, secret } = await issueKey(
        deps,
        tenant.id,
        { name, scopes, expiresAt },
        auditActorOf(request),
        now,
      )
      const page = createdPath(home, apiKey.id)
      secretOnce.put(request, reply, page, apiKey.id, secret, now)
      return reply.redirect(page, 303)
    },
  )

  app.get(
    '/settings/api/keys/:keyId/created',
    { schema: { params: KeyParams, querystring: CreatedQuery }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const { apiKey } = await findKeyOr404(tenant.id, request.params.keyId)
      const now = deps.clock.now()
      const secret = secretOnce.take(request, reply, createdPath(home, apiKey.id), apiKey.id, now)
      if (secret === undefined) {
        return reply.redirect(`${home}/settings/api?notice=key-shown`, 303)
      }
      const from = request.query.rolled_from
      const rolledFrom = from ? (await findApiKey(db, tenant.id, from, prefix))?.apiKey : undefined
      return render(request, reply, (c) =>
        keyCreatedPage(c, { home, key: apiKey, secret, ...(rolledFrom ? { rolledFrom } : {}) }),
      )
    },
  )

  app.get(
    '/settings/api/keys/:keyId/revoke',
    { schema: { params: KeyParams }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const { apiKey } = await findKeyOr404(tenant.id, request.params.keyId)
      refuseMemberUnlessOwnReadOnly(request, apiKey)
      const { rows } = await keyRows(tenant.id, deps.clock.now())
      const requests = rows.find((r) => r.key.id === apiKey.id)?.usage.reduce((a, b) => a + b, 0) ?? 0
      return render(request, reply, (c) => revokeConfirmPage(c, { home, key: apiKey, requests }))
    },
  )

  app.post(
    '/settings/api/keys/:keyId/revoke',
    { schema: { params: KeyParams, body: RevokeKeyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const key = await findKeyOr404(tenant.id, request.params.keyId)
      refuseMemberUnlessOwnReadOnly(request, key.apiKey)
      const now = deps.clock.now()
      // Never limited: revoking is what one does when a key leaks, and it makes no secret.
      const { pushed } = await revokeKey(deps, key, auditActorOf(request), now)
      warnIfNotPushed(request.log, key.apiKey.id, pushed)
      return reply.redirect(`${home}/settings/api?notice=revoked`, 303)
    },
  )

  app.get(
    '/settings/api/keys/:keyId/roll',
    { schema: { params: KeyParams }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const { apiKey } = await findKeyOr404(tenant.id, request.params.keyId)
      refuseMemberUnlessOwnReadOnly(request, apiKey)
      if (keyState(apiKey, deps.clock.now()) !== 'active') {
        throw new AppError('not_found', 'This key cannot be rolled.')
      }
      return render(request, reply, (c) => rollKeyPage(c, { home, key: apiKey }))
    },
  )

  app.post(
    '/settings/api/keys/:keyId/roll',
    { schema: { params: KeyParams, body: RollKeyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const old = await findKeyOr404(tenant.id, request.params.keyId)
      refuseMemberUnlessOwnReadOnly(request, old.apiKey)
      const { overlap, confirm } = formValues(request, ROLL_KEY_FIELDS)
      const overlapMs = isChoiceOf(OVERLAP_CHOICES, overlap) ? DURATION_MS[overlap] : undefined
      if (overlapMs === undefined || old.apiKey.revoked_at !== null) {
        throw new AppError('not_found', 'This key cannot be rolled.')
      }
      // "Now" ends the live key in one step: it is confirmed first, like a revoke.
      if (overlapMs === 0 && confirm !== 'yes') {
        return render(request, reply, (c) => rollNowConfirmPage(c, { home, key: old.apiKey }))
      }
      const now = deps.clock.now()
      await checkKeyIssueBudget(request, now)
      const { apiKey, secret, pushed } = await rollKey(deps, old, overlapMs, auditActorOf(request), now)
      warnIfNotPushed(request.log, old.apiKey.id, pushed)
      const page = createdPath(home, apiKey.id)
      secretOnce.put(request, reply, page, apiKey.id, secret, now)
      return reply.redirect(`${page}?rolled_from=${old.apiKey.id}`, 303)
    },
  )
}

/** A full-access key is for owners and admins only (docs/design.md#web-application). */
function refuseMemberFullAccess(request: FastifyRequest): void {
  if (!can(accountContext(request).role, 'full_keys')) {
    throw new AppError('insufficient_scope', 'Members can create and manage read-only keys only.')
  }
}
