// GET /api/v1/events: the account's change events in feed order (feed-position.ts), with the same
// cursor paging as every list; GET /api/v1/events/{id}: one of them.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { findStoredBody } from '../db/stored-body.js'
import type { Deps } from '../deps.js'
import { authOf, releaseConcurrencySlot } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { apiProblems, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { onResponseClosed } from '../http/response-closed.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { sendAnswer } from '../idempotency/idempotency.js'
import { EventSchema, ListEventsQuery } from './events.js'
import { listEventRows } from './events.store.js'
import { FEED_START, feedEnd } from './feed-position.js'
import { LONG_POLLS_PER_TENANT, NOTIFIED_RECHECK_MS, RECHECK_MS } from './feed-signal.js'

export const eventsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  // A stopping server answers its waiting polls at once (no events, the cursor to go on from)
  // rather than holding its shutdown for up to `wait` seconds; the client polls the next instance.
  const closing = new AbortController()
  app.addHook('preClose', (done) => {
    closing.abort()
    done()
  })
  /**
   * A long poll about to wait: it gives up its place among the account's requests in progress (it
   * holds nothing but a timer), and counts among the tenant's waiting polls instead.
   */
  function startWaiting(request: FastifyRequest, tenantId: string): () => void {
    const leave = deps.feedSignal.enterWait(tenantId)
    if (leave === undefined) {
      throw new AppError(
        'rate_limited',
        `This account has ${LONG_POLLS_PER_TENANT} long polls waiting, the most one process holds; retry after 1 s.`,
        { headers: { 'retry-after': '1' } },
      )
    }
    releaseConcurrencySlot(request)
    return leave
  }

  app.get(
    '',
    {
      schema: {
        operationId: 'listEvents',
        summary: 'List events',
        description:
          'Every change, in commit order: a walk that follows next_cursor sees every event once, including those committed while it runs. The cursor never ends: at the end of the feed it goes on from there; with wait=N the answer comes as soon as an event is committed.',
        querystring: ListEventsQuery,
        response: {
          200: jsonResponse(ListEnvelope('EventList', 'events', EventSchema), 'A page of events.'),
          ...apiProblems('invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, wait = 0, from, ...filters } = request.query
      if (from !== undefined && after !== undefined) {
        throw new AppError('invalid_parameter', 'from=now starts a walk; after continues one: give one of them.', {
          errors: [{ field: 'from', message: 'cannot be combined with after' }],
        })
      }
      const accountId = authOf(request).tenant.id
      // The client going away ends the wait (nothing is left waiting for no one), even one that left
      // while its key was being looked up; and so does a shutdown.
      const gone = new AbortController()
      onResponseClosed(reply.raw, () => gone.abort())
      const ended = AbortSignal.any([gone.signal, closing.signal])
      return sendPage(
        reply,
        deps.secret,
        { list: 'events', accountId, filters },
        { limit, after },
        async (position) => {
          const afterId = position.afterId ?? (from === 'now' ? await feedEnd(deps.database.db) : undefined)
          const deadline = performance.now() + wait * 1000
          // When the last signal came whose event the feed did not serve yet (PostgreSQL serves an event
          // once every older transaction has ended): for RECHECK_MS after it the feed is read again,
          // each read half the time since the signal after the one before (at least 50 ms), not only
          // when the probe, which may have looked before that commit, says so. The growing pause keeps
          // a held-back event to about ten reads per waiting poll, and its answer within half its wait.
          let unservedSince = Number.NEGATIVE_INFINITY
          let leave: (() => void) | undefined
          const signals = deps.feedSignal.watch(accountId)
          try {
            for (let read = true; ; ) {
              if (read) {
                signals.reading()
              }
              const rows = read
                ? await listEventRows(deps.database.db, accountId, { ...filters, ...position, afterId })
                : []
              const left = deadline - performance.now()
              if (rows.length > 0 || left <= 0 || ended.aborted) {
                // The feed's cursor never ends: at its end, it stays where this page stopped.
                return { rows, scannedTo: rows.at(-1)?.position ?? afterId ?? FEED_START }
              }
              leave ??= startWaiting(request, accountId)
              const sinceSignal = performance.now() - unservedSince
              const soon = sinceSignal < RECHECK_MS
              const pause = soon ? Math.max(NOTIFIED_RECHECK_MS, sinceSignal / 2) : RECHECK_MS
              const woken = await signals.next(Math.min(left, pause), ended)
              if (woken) {
                unservedSince = performance.now()
              }
              // What no signal announced, the tenant's shared probe finds: the feed is read only then.
              read = woken || soon || (await deps.feedProbe.hasPast(accountId, afterId))
            }
          } finally {
            signals.close()
            leave?.()
          }
        },
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
