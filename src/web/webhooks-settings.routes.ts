// Settings → "API & Webhooks", the webhooks half: add an endpoint, and the endpoint's page (reveal,
// roll, enable or disable, delete, test, resend what failed since a time, recent deliveries). Owners and admins only. Changes go
// through webhooks/endpoint-lifecycle.ts, as the API's do, audited with the person as actor.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { tenantById } from '../accounts/tenant.js'
import { listAudit, WEBHOOK_ACTIONS } from '../audit/audit.js'
import type { Db } from '../db/transaction.js'
import type { Deps } from '../deps.js'
import { EVENT_TYPES } from '../events/events.js'
import { AppError, statusOf } from '../http/errors.js'
import { can } from '../users/roles.js'
import type { WebhookDelivery } from '../webhooks/deliveries.js'
import { listDeliveryRows } from '../webhooks/deliveries.store.js'
import {
  changeEndpoint,
  createEndpoint,
  recoverEndpointDeliveries,
  removeEndpoint,
  requireEndpoint,
  revealEndpointSecret,
  rollSecret,
  sendTestEvent,
} from '../webhooks/endpoint-lifecycle.js'
import {
  ENDPOINT_DESCRIPTION_MAX,
  ENDPOINT_URL_MAX,
  ENDPOINTS_PER_ACCOUNT_MAX,
  type EndpointEvents,
  toEndpoint,
  type WebhookEndpoint,
} from '../webhooks/endpoints.js'
import { type EndpointRow, findEndpoint, listEndpointRows } from '../webhooks/endpoints.store.js'
import { asLocalTimeValue, FormBody, formField, formValues, parseFormTime } from './forms.js'
import { NoticeQuery, noticeOf } from './notices.js'
import { ACTIVITY_SHOWN } from './pages/activity.js'
import { errorPage } from './pages/layout.js'
import {
  deleteEndpointPage,
  type EndpointFormValues,
  endpointPage,
  newEndpointPage,
  rollNowConfirmPage,
  type SECRET_OVERLAP_CHOICES,
  secretOncePage,
  webhooksListPage,
} from './pages/webhooks-pages.js'
import type { Render } from './render.js'
import { type AccountContext, accountContext, auditActorOf, homeOf } from './request-context.js'
import { createSecretOnce } from './secret-once.js'
import type { CookieOptions } from './session.js'
import { webhookDeliveriesSettingsRoutes } from './webhook-deliveries-settings.routes.js'

/** Owners and admins manage webhooks; members work with contacts only (docs/design.md#web-application). */
export const canManageWebhooks = (role: AccountContext['role']): boolean => can(role, 'webhooks')

/** The account's endpoints (at most ENDPOINTS_PER_ACCOUNT_MAX), oldest first. */
export async function listAccountEndpoints(db: Db, accountId: string): Promise<WebhookEndpoint[]> {
  const rows = await listEndpointRows(db, accountId, { afterId: undefined, fetch: ENDPOINTS_PER_ACCOUNT_MAX })
  return rows.map((row) => JSON.parse(row.body) as WebhookEndpoint)
}

const RECENT_DELIVERIES = 25
/** Seconds between reloads of an endpoint's page while one of its deliveries is pending. */
const PENDING_REFRESH_S = 2
/** How long the old secret still signs, per choice of the roll form. */
const OVERLAP_SECONDS = { now: 0, '1h': 3600, '24h': 86_400, '7d': 604_800 } as const satisfies Record<
  keyof typeof SECRET_OVERLAP_CHOICES,
  number
>
const NOTICES = new Map([
  ['enabled', 'The endpoint is enabled.'],
  ['disabled', 'The endpoint is disabled: nothing is sent to it until it is enabled again.'],
  ['test-sent', 'A webhook.test event is queued for this endpoint.'],
  ['deleted', 'The webhook endpoint was deleted.'],
  ['recovered-none', 'No delivery of that period had failed: nothing was resent.'],
])
/** The endpoint page's query: a notice, and how many deliveries a recover queued. */
const EndpointQuery = Type.Object({ notice: Type.Optional(Type.String()), queued: Type.Optional(Type.String()) })

/** "N failed deliveries are queued…", after a recover that queued some. */
function recoveredNotice(query: { notice?: string; queued?: string }): string | undefined {
  if (query.notice !== 'recovered' || !/^[1-9]\d{0,8}$/.test(query.queued ?? '')) {
    return undefined
  }
  const queued = Number(query.queued)
  return queued === 1
    ? '1 failed delivery of that period is queued for one more attempt.'
    : `${queued.toLocaleString('en-US')} failed deliveries of that period are queued for one more attempt each.`
}

/** The recover form's default: the last day. */
const RECOVER_DEFAULT_MS = 86_400_000

const LIST_NOTICES = new Map([['endpoint-deleted', 'The webhook endpoint was deleted.']])

const EndpointParams = Type.Object({ accountId: Type.String(), endpointId: Type.String() })
const CREATE_FIELDS = ['url', 'description'] as const
const CreateForm = FormBody([...CREATE_FIELDS, 'events'])
const ROLL_FIELDS = ['overlap', 'confirm'] as const
const RollForm = FormBody(ROLL_FIELDS)
const STATUS_FIELDS = ['status'] as const
const StatusForm = FormBody(STATUS_FIELDS)
const EmptyForm = FormBody([])
const RECOVER_FIELDS = ['since'] as const
const RecoverForm = FormBody(RECOVER_FIELDS)

export const webhooksSettingsRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  const { db } = deps.database
  const secretOnce = createSecretOnce(deps.secret, cookieOptions)
  const prefix = (home: string) => `${home}/settings/api/webhooks`

  // Before any handler: a member reads nothing here and changes nothing (the CSRF check ran earlier).
  app.addHook('preHandler', async (request, reply) => {
    if (!canManageWebhooks(accountContext(request).role)) {
      return render(
        request,
        reply,
        (c) => errorPage(403, 'Not allowed', 'Only owners and admins of this account manage webhook endpoints.', c),
        403,
      )
    }
  })

  /** The page's tenant, its root path and the endpoint, or the 404 page. */
  async function endpointOf(request: FastifyRequest, endpointId: string) {
    const { tenant, home } = accountContext(request)
    return { tenant, home, row: await requireEndpoint(db, tenant.id, endpointId) }
  }

  /** The previous secret's end, while it still signs. */
  const oldSecretUntil = (row: EndpointRow, now: Date): string | null =>
    row.previous_secret !== null &&
    row.previous_secret_expires_at !== null &&
    row.previous_secret_expires_at > now.toISOString()
      ? row.previous_secret_expires_at
      : null

  async function showEndpoint(
    request: FastifyRequest,
    reply: FastifyReply,
    row: EndpointRow,
    extra: { revealed?: string; notice?: string; error?: string; recoverSince?: string } = {},
    status = 200,
  ) {
    const now = deps.clock.now()
    const rows = await listDeliveryRows(db, row.account_id, row.id, { afterId: undefined, fetch: RECENT_DELIVERIES })
    const deliveries = rows.map((r) => JSON.parse(r.body) as WebhookDelivery)
    // A delivery not yet attempted is attempted within moments: the page follows it by itself (not
    // a page answering a post, such as a revealed secret, which a reload would take away).
    if (request.method === 'GET' && deliveries.some((delivery) => delivery.status === 'pending')) {
      reply.header('refresh', String(PENDING_REFRESH_S))
    }
    return render(
      request,
      reply,
      (c) =>
        endpointPage(c, {
          home: accountContext(request).home,
          endpoint: toEndpoint(row),
          deliveries,
          oldSecretUntil: oldSecretUntil(row, now),
          recoverSince: asLocalTimeValue(Math.floor((now.getTime() - RECOVER_DEFAULT_MS) / 1000) * 1000),
          ...extra,
        }),
      status,
    )
  }

  /** Runs a lifecycle action; an AppError (other than not_found) is shown on the endpoint page, with its status. */
  async function orShowError<T>(
    request: FastifyRequest,
    reply: FastifyReply,
    row: EndpointRow,
    action: () => Promise<T>,
    shown: { recoverSince?: string } = {},
  ): Promise<{ ok: true; value: T } | { ok: false; reply: FastifyReply }> {
    try {
      return { ok: true, value: await action() }
    } catch (error) {
      if (!(error instanceof AppError) || error.code === 'not_found') {
        throw error
      }
      const fresh = (await findEndpoint(db, row.account_id, row.id)) ?? row
      const page = await showEndpoint(request, reply, fresh, { error: error.message, ...shown }, statusOf(error.code))
      return { ok: false, reply: page }
    }
  }

  /** Redirects to the page that shows a new secret once. */
  function redirectToSecret(request: FastifyRequest, reply: FastifyReply, row: EndpointRow, secret: string) {
    const page = `${prefix(homeOf(tenantById(row.account_id)))}/${row.id}/secret`
    secretOnce.put(request, reply, page, row.id, secret, deps.clock.now())
    return reply.redirect(page, 303)
  }

  app.get(
    '/settings/api/webhooks',
    { schema: { querystring: NoticeQuery }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const [endpoints, activity] = await Promise.all([
        listAccountEndpoints(db, tenant.id),
        listAudit(db, tenant.id, ACTIVITY_SHOWN, WEBHOOK_ACTIONS),
      ])
      const notice = noticeOf(LIST_NOTICES, request.query.notice)
      return render(request, reply, (c) => webhooksListPage(c, { home, endpoints, activity, notice }))
    },
  )

  app.get('/settings/api/webhooks/new', async (request, reply) => {
    const { home } = accountContext(request)
    return render(request, reply, (c) => newEndpointPage(c, { home }))
  })

  app.post(
    '/settings/api/webhooks',
    { schema: { body: CreateForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const fields = formValues(request, CREATE_FIELDS)
      const url = fields.url.trim()
      const description = fields.description.trim()
      const events = checkedEvents(formField(request.body, 'events'))
      const values: EndpointFormValues = { url: fields.url, description: fields.description, events: events.checked }
      const again = (problem: { error?: string; urlError?: string }, status: number) =>
        render(request, reply, (c) => newEndpointPage(c, { home, values, ...problem }), status)
      if (url.length === 0 || url.length > ENDPOINT_URL_MAX) {
        return again({ urlError: `Enter the endpoint’s https URL (at most ${ENDPOINT_URL_MAX} characters).` }, 400)
      }
      if (!events.ok) {
        return again({ error: events.error }, 400)
      }
      if (description.length > ENDPOINT_DESCRIPTION_MAX) {
        return again({ error: `Keep the description to ${ENDPOINT_DESCRIPTION_MAX} characters.` }, 400)
      }
      try {
        const { endpoint, secret } = await createEndpoint(
          deps.webhooks,
          tenant.id,
          { url, description: description === '' ? null : description, events: events.value },
          auditActorOf(request),
          deps.clock.now(),
        )
        return redirectToSecret(request, reply, endpoint, secret)
      } catch (error) {
        if (!(error instanceof AppError)) {
          throw error
        }
        return error.code === 'invalid_parameter'
          ? again({ urlError: sentence(error.message) }, 400)
          : again({ error: error.message }, error.code === 'quota_exceeded' ? 403 : 400)
      }
    },
  )

  app.get(
    '/settings/api/webhooks/:endpointId/secret',
    { schema: { params: EndpointParams }, attachValidation: true },
    async (request, reply) => {
      const { home, row } = await endpointOf(request, request.params.endpointId)
      const now = deps.clock.now()
      const secret = secretOnce.take(request, reply, `${prefix(home)}/${row.id}/secret`, row.id, now)
      return render(request, reply, (c) =>
        secretOncePage(c, {
          home,
          endpoint: toEndpoint(row),
          secret,
          oldSecretUntil: oldSecretUntil(row, now),
        }),
      )
    },
  )

  app.get(
    '/settings/api/webhooks/:endpointId',
    { schema: { params: EndpointParams, querystring: EndpointQuery }, attachValidation: true },
    async (request, reply) => {
      const { row } = await endpointOf(request, request.params.endpointId)
      const query = request.query ?? {}
      const notice = recoveredNotice(query) ?? noticeOf(NOTICES, query.notice)
      return showEndpoint(request, reply, row, notice ? { notice } : {})
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/reveal',
    { schema: { params: EndpointParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, row } = await endpointOf(request, request.params.endpointId)
      const revealed = await revealEndpointSecret(
        deps.webhooks,
        tenant.id,
        row.id,
        auditActorOf(request),
        deps.clock.now(),
      )
      return showEndpoint(request, reply, row, { revealed })
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/roll',
    { schema: { params: EndpointParams, body: RollForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home, row } = await endpointOf(request, request.params.endpointId)
      const { overlap, confirm } = formValues(request, ROLL_FIELDS)
      if (!Object.hasOwn(OVERLAP_SECONDS, overlap)) {
        return showEndpoint(request, reply, row, { error: 'Choose when the old secret stops signing.' }, 400)
      }
      const seconds = OVERLAP_SECONDS[overlap as keyof typeof OVERLAP_SECONDS]
      // Rolling with no overlap breaks the receiver until it has the new secret: one more click.
      if (seconds === 0 && confirm !== 'yes') {
        return render(request, reply, (c) => rollNowConfirmPage(c, { home, endpoint: toEndpoint(row) }))
      }
      const { endpoint, secret } = await rollSecret(
        deps.webhooks,
        tenant.id,
        row.id,
        seconds,
        auditActorOf(request),
        deps.clock.now(),
      )
      return redirectToSecret(request, reply, endpoint, secret)
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/status',
    { schema: { params: EndpointParams, body: StatusForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home, row } = await endpointOf(request, request.params.endpointId)
      const { status } = formValues(request, STATUS_FIELDS)
      if (status !== 'enabled' && status !== 'disabled') {
        return showEndpoint(request, reply, row, { error: 'Choose to enable or disable the endpoint.' }, 400)
      }
      const done = await orShowError(request, reply, row, () =>
        changeEndpoint(deps.webhooks, tenant.id, row.id, { status }, auditActorOf(request), deps.clock.now()),
      )
      return done.ok ? reply.redirect(`${prefix(home)}/${row.id}?notice=${status}`, 303) : done.reply
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/test',
    { schema: { params: EndpointParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home, row } = await endpointOf(request, request.params.endpointId)
      const done = await orShowError(request, reply, row, () =>
        sendTestEvent(deps.webhooks, tenant.id, row.id, auditActorOf(request), deps.clock.now()),
      )
      return done.ok ? reply.redirect(`${prefix(home)}/${row.id}?notice=test-sent`, 303) : done.reply
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/recover',
    { schema: { params: EndpointParams, body: RecoverForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home, row } = await endpointOf(request, request.params.endpointId)
      const { since } = formValues(request, RECOVER_FIELDS)
      const ms = parseFormTime(since)
      if (ms === undefined) {
        const error = 'Enter the time to resend from, such as 2026-11-28 14:30 (UTC).'
        return showEndpoint(request, reply, row, { error, recoverSince: since }, 400)
      }
      const range = { since: new Date(ms).toISOString() }
      const done = await orShowError(
        request,
        reply,
        row,
        () =>
          recoverEndpointDeliveries(deps.webhooks, tenant.id, row.id, range, auditActorOf(request), deps.clock.now()),
        { recoverSince: since },
      )
      if (!done.ok) {
        return done.reply
      }
      const { queued } = done.value
      const notice = queued > 0 ? `recovered&queued=${queued}` : 'recovered-none'
      return reply.redirect(`${prefix(home)}/${row.id}?notice=${notice}`, 303)
    },
  )

  app.get(
    '/settings/api/webhooks/:endpointId/delete',
    { schema: { params: EndpointParams }, attachValidation: true },
    async (request, reply) => {
      const { home, row } = await endpointOf(request, request.params.endpointId)
      return render(request, reply, (c) => deleteEndpointPage(c, { home, endpoint: toEndpoint(row) }))
    },
  )

  app.post(
    '/settings/api/webhooks/:endpointId/delete',
    { schema: { params: EndpointParams, body: EmptyForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      await removeEndpoint(deps.webhooks, tenant.id, request.params.endpointId, auditActorOf(request), deps.clock.now())
      return reply.redirect(`${prefix(home)}?notice=endpoint-deleted`, 303)
    },
  )

  await app.register(webhookDeliveriesSettingsRoutes, { deps, render })
}

type CheckedEvents =
  | { ok: true; value: EndpointEvents; checked: string[] }
  | { ok: false; error: string; checked: string[] }

/** The event checkboxes: "all" (`*`), or one or more of the types. */
function checkedEvents(raw: unknown): CheckedEvents {
  const checked = (Array.isArray(raw) ? raw : [raw]).filter((v): v is string => typeof v === 'string')
  if (checked.includes('*')) {
    return { ok: true, value: ['*'], checked: ['*'] }
  }
  const types = EVENT_TYPES.filter((type) => checked.includes(type))
  if (types.length === 0 || types.length !== new Set(checked).size) {
    return { ok: false, error: 'Choose all events, or at least one event type from the list.', checked }
  }
  return { ok: true, value: types as EndpointEvents, checked }
}

/** "url must use https" → "The URL must use https." */
function sentence(message: string): string {
  const text = message.replace(/^url /, 'The URL ')
  return /[.!?]$/.test(text) ? text : `${text}.`
}
