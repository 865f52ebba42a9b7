// GET /api/v1/request_logs: the tenant's request log, newest first, with the same cursor paging as
// every list; GET /api/v1/request_logs/{id}: one request by its Request-Id (docs/request-log.md).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Deps } from '../deps.js'
import { authOf, requireFullAccess } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { apiProblems, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { sendAnswer } from '../idempotency/idempotency.js'
import { ListRequestLogsQuery, RequestLogSchema } from './request-log.js'
import { findRequestLog, listRequestLogRows, REQUEST_LOG_SCAN_MAX } from './request-logs.store.js'

export const requestLogsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.database
  // Full access even to read: the log shows every key's requests and the addresses they came from.
  requireFullAccess(app, 'Request logs')

  app.get(
    '',
    {
      schema: {
        operationId: 'listRequestLogs',
        summary: 'List request logs',
        description: `The requests made with this account's keys in this mode, newest first; pass next_cursor back as \`after\`. Kept REQUEST_LOG_RETENTION_DAYS (7 by default). An entry is written within about a second of its response. With \`status\`, \`key_id\`, \`method\` or \`path\`, a page examines at most ${REQUEST_LOG_SCAN_MAX.toLocaleString('en')} entries and may end short, even empty, with a non-null next_cursor: keep going until next_cursor is null.`,
        querystring: ListRequestLogsQuery,
        response: {
          200: jsonResponse(
            ListEnvelope('RequestLogList', 'request_logs', RequestLogSchema),
            'A page of request logs.',
          ),
          ...apiProblems('insufficient_scope', 'invalid_cursor', 'invalid_parameter'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const tenantId = authOf(request).tenant.id
      // This instance's entries not yet written are written first: a client sees its own requests.
      await deps.requestLog.flush(tenantId)
      return sendPage(
        reply,
        deps.secret,
        { list: 'request_logs', accountId: tenantId, filters },
        { limit, after },
        (position) => listRequestLogRows(db, tenantId, { ...filters, ...position }),
      )
    },
  )

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getRequestLog',
        summary: 'Get a request log',
        description:
          'One request of this account in this mode, by its `Request-Id`; any other id, well-formed or not, is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: {
          200: jsonResponse(RequestLogSchema, 'The request.'),
          ...apiProblems('insufficient_scope', 'not_found'),
        },
      },
    },
    async (request, reply) => {
      const tenantId = authOf(request).tenant.id
      await deps.requestLog.flush(tenantId)
      const entry = await findRequestLog(db, tenantId, request.params.id)
      if (entry === undefined) {
        throw new AppError('not_found', 'No request log with this id exists in this account.')
      }
      return sendAnswer(reply, { status: 200, body: JSON.stringify(entry), location: null })
    },
  )
}
