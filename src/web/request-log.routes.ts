// Settings → "API & Webhooks" → Request log: the page's mode's log with the API's filters, newest
// first, a page at a time; the Request-Id box; one entry's detail. Owners and admins only, like
// webhooks: the log shows every key's requests and the addresses they came from.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { tenantOf } from '../accounts/tenant.js'
import { type ApiKey, listApiKeys } from '../api-keys/api-keys.store.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { idPattern } from '../lib/ids.js'
import {
  LOGGED_METHODS,
  PATH_MAX,
  type RequestLog,
  type RequestLogFilters,
  STATUS_FILTER,
} from '../request-logs/request-log.js'
import { findRequestLog, listRequestLogRows } from '../request-logs/request-logs.store.js'
import { asLocalTimeValue, parseFormTime } from './forms.js'
import { errorPage } from './pages/layout.js'
import {
  type LogFilterValues,
  type LookupMiss,
  logsUrl,
  requestLogEntryPage,
  requestLogPage,
} from './pages/request-log-pages.js'
import type { Render } from './render.js'
import { accountContext, homeOf } from './request-context.js'
import { canManageWebhooks } from './webhooks-settings.routes.js'

export const REQUEST_LOG_PAGE_SIZE = 50

const FILTER_NAMES = ['status', 'key_id', 'method', 'path', 'created_after', 'created_before'] as const
type FilterName = (typeof FILTER_NAMES)[number]

/**
 * A query parameter as parsed: text, or a list when repeated. Checked by the handler, behind the
 * role check, so a bad link gets the page with a message rather than a bare 400.
 */
const QueryValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const LogListQuery = Type.Object({
  ...Object.fromEntries(FILTER_NAMES.map((name) => [name, QueryValue])),
  before: QueryValue,
  request_id: QueryValue,
})
const EntryParams = Type.Object({ accountId: Type.String(), requestId: Type.String() })

/** A Request-Id anywhere in pasted text, in either case: the id pattern without its anchors. */
const REQUEST_ID = new RegExp(idPattern('request').slice(1, -1), 'i')
/** Where the next page starts: the last id shown, or where a filtered scan stopped (`req_…~`). */
const PAGE_START = new RegExp(`${idPattern('request').slice(0, -1)}~?$`)
const STATUS = new RegExp(STATUS_FILTER)

const EMPTY_VALUES: LogFilterValues = {
  status: '',
  key_id: '',
  method: '',
  path: '',
  created_after: '',
  created_before: '',
}

const single = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? undefined : value?.trim()

/** Each filter as a message names it. */
const LABELS: Record<FilterName, string> = {
  status: 'status',
  key_id: 'key',
  method: 'method',
  path: 'path',
  created_after: '“After” time',
  created_before: '“Before” time',
}

type ReadFilters =
  | { ok: true; filters: RequestLogFilters; values: LogFilterValues }
  | { ok: false; errors: string[]; values: LogFilterValues }

/** The filters of the query, checked and normalized, or what is wrong with them in words. */
function readFilters(query: Record<string, string | string[] | undefined>, keys: readonly ApiKey[]): ReadFilters {
  const values = { ...EMPTY_VALUES }
  const filters: RequestLogFilters = {}
  const errors: string[] = []
  const times: Partial<Record<'created_after' | 'created_before', number>> = {}
  for (const name of FILTER_NAMES) {
    const raw = query[name]
    if (Array.isArray(raw)) {
      errors.push(`The link repeats the ${LABELS[name]}: give it once.`)
      continue
    }
    const text = raw?.trim() ?? ''
    values[name] = text
    if (text === '') {
      continue
    }
    if (name === 'status') {
      const status = text.toLowerCase()
      if (STATUS.test(status)) {
        filters.status = status
        values.status = status
      } else {
        errors.push(`“${text}” is not a status: enter one such as 404, or a class such as 4xx (1xx to 5xx).`)
      }
    } else if (name === 'key_id') {
      if (keys.some((key) => key.id === text)) {
        filters.key_id = text
      } else {
        errors.push('Choose the key from the list: the one asked for is not a key of this mode.')
      }
    } else if (name === 'method') {
      const method = text.toUpperCase()
      if ((LOGGED_METHODS as readonly string[]).includes(method)) {
        filters.method = method as (typeof LOGGED_METHODS)[number]
        values.method = method
      } else {
        errors.push(`Choose the method from the list (${LOGGED_METHODS.join(', ')}).`)
      }
    } else if (name === 'path') {
      if (text.length > PATH_MAX) {
        errors.push(`The path is too long: paths are kept to ${PATH_MAX.toLocaleString('en')} characters.`)
      } else if (!text.startsWith('/')) {
        errors.push('A path starts with /, e.g. /api/v1/contacts/.')
      } else {
        filters.path = text
      }
    } else {
      const ms = parseFormTime(text)
      if (ms === undefined) {
        errors.push(`The ${LABELS[name]} “${text}” is not a time: use the picker, or write e.g. 2026-11-28T14:30:00Z.`)
      } else {
        times[name] = ms
        filters[name] = new Date(ms).toISOString()
        values[name] = asLocalTimeValue(ms)
      }
    }
  }
  const { created_after: after, created_before: before } = times
  if (after !== undefined && before !== undefined && after >= before) {
    errors.push('The “After” time must be earlier than the “Before” time.')
  }
  return errors.length > 0 ? { ok: false, errors, values } : { ok: true, filters, values }
}

export const requestLogRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; render: Render }> = async (
  app,
  { deps, render },
) => {
  const { db } = deps.database

  // Before any handler: a member reads nothing here, by link or by URL.
  app.addHook('preHandler', async (request, reply) => {
    if (!canManageWebhooks(accountContext(request).role)) {
      return render(
        request,
        reply,
        (c) => errorPage(403, 'Not allowed', 'Only owners and admins of this account see its request log.', c),
        403,
      )
    }
  })

  /** The request of this id in this mode; this instance's pending entries are written first. */
  async function findEntry(tenantId: string, id: string): Promise<RequestLog | undefined> {
    await deps.requestLog.flush(tenantId)
    return findRequestLog(db, tenantId, id)
  }

  /** What the Request-Id box found: the entry's page, or why not (malformed, unknown, other mode). */
  async function lookUp(request: FastifyRequest, text: string): Promise<{ href: string } | { miss: LookupMiss }> {
    const { tenant, home } = accountContext(request)
    // A pasted header line or JSON field (`Request-Id: req_…`, `"request_id":"req_…"`) holds one.
    const found = REQUEST_ID.exec(text)?.[0]
    if (found === undefined) {
      return { miss: { reason: 'malformed', value: text } }
    }
    const id = `req_${found.slice(4).toUpperCase()}`
    if (await findEntry(tenant.id, id)) {
      return { href: `${logsUrl(home)}/${id}` }
    }
    // A test request's id pasted in live mode, or the reverse: the same person may see both.
    const other = tenantOf(tenant.accountId, !tenant.livemode)
    if (await findEntry(other.id, id)) {
      return { miss: { reason: 'other_mode', id, href: `${logsUrl(homeOf(other))}/${id}` } }
    }
    return { miss: { reason: 'unknown', id, retentionDays: deps.config.requestLog.retentionDays } }
  }

  async function showList(
    request: FastifyRequest,
    reply: FastifyReply,
    query: Record<string, string | string[] | undefined>,
    lookup?: { value: string; miss: LookupMiss },
  ) {
    const { tenant, home } = accountContext(request)
    const keys = await listApiKeys(db, tenant.id, deps.config.keyPrefix)
    const page = { home, livemode: tenant.livemode, keys, ...(lookup ? { lookup } : {}) }
    const status = lookup ? 404 : 200
    const read = readFilters(query, keys)
    if (!read.ok) {
      const values = read.values
      return render(
        request,
        reply,
        (c) => requestLogPage(c, { ...page, values, filtered: true, entries: [], errors: read.errors }),
        400,
      )
    }
    const { filters, values } = read
    const before = query.before
    if (before !== undefined && (Array.isArray(before) || !PAGE_START.test(before))) {
      const errors = ['This “Older” link is not valid. Start again from the newest requests.']
      return render(
        request,
        reply,
        (c) => requestLogPage(c, { ...page, values, filtered: true, entries: [], errors }),
        400,
      )
    }
    // This instance's entries not yet written are written first, as the API's list does.
    await deps.requestLog.flush(tenant.id)
    const { rows, scannedTo } = await listRequestLogRows(db, tenant.id, {
      ...filters,
      afterId: before,
      fetch: REQUEST_LOG_PAGE_SIZE + 1,
    })
    const entries = rows.slice(0, REQUEST_LOG_PAGE_SIZE).map((row) => JSON.parse(row.body) as RequestLog)
    // Links carry the normalized filters, so a page's Older link means what its form shows.
    const link = (start?: string) => {
      const params = new URLSearchParams(Object.entries(filters) as [string, string][])
      if (start !== undefined) {
        params.set('before', start)
      }
      const search = params.toString()
      return search ? `${logsUrl(home)}?${search}` : logsUrl(home)
    }
    const last = entries[entries.length - 1]
    const olderStart = rows.length > REQUEST_LOG_PAGE_SIZE && last ? last.id : scannedTo
    return render(
      request,
      reply,
      (c) =>
        requestLogPage(c, {
          ...page,
          values,
          filtered: Object.keys(filters).length > 0,
          entries,
          ...(olderStart !== undefined ? { olderHref: link(olderStart) } : {}),
          ...(before !== undefined ? { newestHref: link() } : {}),
          continues: scannedTo !== undefined && olderStart === scannedTo,
        }),
      status,
    )
  }

  app.get('/settings/api/logs', { schema: { querystring: LogListQuery } }, async (request, reply) => {
    const query = request.query as Record<string, string | string[] | undefined>
    if (query.request_id !== undefined) {
      const value = single(query.request_id) ?? ''
      const found = await lookUp(request, value)
      if ('href' in found) {
        return reply.redirect(found.href, 303)
      }
      // The box's answer under it, above the newest page of the log.
      return showList(request, reply, {}, { value, miss: found.miss })
    }
    return showList(request, reply, query)
  })

  app.get(
    '/settings/api/logs/:requestId',
    { schema: { params: EntryParams }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const entry = await findEntry(tenant.id, request.params.requestId)
      if (entry === undefined) {
        throw new AppError('not_found', 'No request log with this id exists in this account.')
      }
      const keys = await listApiKeys(db, tenant.id, deps.config.keyPrefix)
      const key = keys.find((candidate) => candidate.id === entry.key_id)
      return render(request, reply, (c) => requestLogEntryPage(c, { home, entry, key }))
    },
  )
}
