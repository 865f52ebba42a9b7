// GET /api/v1/events: the account's change events in feed order (feed-position.ts), with the same
// cursor paging as every list.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { apiProblems, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { EventSchema, ListEventsQuery } from './events.js'
import { listEventRows } from './events.store.js'

export const eventsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '',
    {
      schema: {
        operationId: 'listEvents',
        summary: 'List events',
        description:
          'Every contact change, in commit order: a walk that follows next_cursor sees every event once, including those committed while it runs.',
        querystring: ListEventsQuery,
        response: {
          200: jsonResponse(ListEnvelope('events', EventSchema), 'A page of events.'),
          ...apiProblems('invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).account.id
      return sendPage(reply, deps.secret, { list: 'events', accountId, filters }, { limit, after }, (position) =>
        listEventRows(deps.database.db, accountId, { ...filters, ...position }),
      )
    },
  )
}
