// GET /api/v1/events: the account's change events in feed order (feed-position.ts), with the same
// cursor paging as every list; GET /api/v1/events/{id}: one of them.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { findStoredBody } from '../db/stored-body.js'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { apiProblems, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { sendAnswer } from '../idempotency/idempotency.js'
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
          200: jsonResponse(ListEnvelope('EventList', 'events', EventSchema), 'A page of events.'),
          ...apiProblems('invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).tenant.id
      return sendPage(reply, deps.secret, { list: 'events', accountId, filters }, { limit, after }, (position) =>
        listEventRows(deps.database.db, accountId, { ...filters, ...position }),
      )
    },
  )

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getEvent',
        summary: 'Get an event',
        description: 'An event of this account; any other id, well-formed or not, is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: { 200: jsonResponse(EventSchema, 'The event.'), ...apiProblems('not_found') },
      },
    },
    async (request, reply) => {
      const body = await findStoredBody(deps.database.db, 'events', authOf(request).tenant.id, request.params.id)
      if (body === undefined) {
        throw new AppError('not_found', 'No event with this id exists in this account.')
      }
      // The stored body as it is, like GET /contacts/{id}: nothing to serialize again.
      return sendAnswer(reply, { status: 200, body, location: null })
    },
  )
}
