// Adds every authenticated request of a plugin scope to the request log once its response is sent.
import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify'
import { authIfAny } from '../http/auth.js'
import { problemCodeOf } from '../http/errors.js'
import { redactKeys } from '../observability/logger.js'
import { PATH_MAX, type StoredEntry, USER_AGENT_MAX } from './request-log.js'
import type { RequestLogWriter } from './request-log-writer.js'

/** Adds the hook to each route of the scope registered after this call, with the route's template. */
export function logRequests(scope: FastifyInstance, writer: RequestLogWriter): void {
  scope.addHook('onRoute', (route) => {
    // Fastify's `/api/v1/contacts/:id` as OpenAPI writes it, made once per route rather than read
    // from request.routeOptions (a new object per call) on every response.
    const template = route.url.replace(/:(\w+)/g, '{$1}')
    // Not async: it runs on every response (as the metrics hook does).
    const hook: onResponseHookHandler = (request, reply, done) => {
      const auth = authIfAny(request)
      if (auth !== undefined) {
        writer.record(auth.tenant.id, entryOf(request, reply, auth.key.id, template))
      }
      done()
    }
    route.onResponse = [route.onResponse ?? [], hook].flat()
  })
}

function entryOf(request: FastifyRequest, reply: FastifyReply, keyId: string, route: string): StoredEntry {
  const { url } = request
  const query = url.indexOf('?')
  const userAgent = request.headers['user-agent']
  const idempotencyKey = request.headers['idempotency-key']
  return [
    String(request.id),
    keyId,
    request.method,
    // Never the query string: it may carry what a client searched for. A key a client put in the
    // path, its user agent or its Idempotency-Key is redacted as in the server's own log.
    redactKeys(query < 0 ? url : url.slice(0, query)).slice(0, PATH_MAX),
    route,
    reply.statusCode,
    Math.round(reply.elapsedTime * 10) / 10,
    problemCodeOf(reply) ?? null,
    request.ip,
    userAgent === undefined ? null : redactKeys(userAgent).slice(0, USER_AGENT_MAX),
    // The preHandler refuses any other shape, so a longer one is cut only on a refused request.
    typeof idempotencyKey === 'string' ? redactKeys(idempotencyKey).slice(0, 255) : null,
    reply.getHeader('idempotent-replayed') === 'true' ? 1 : 0,
  ]
}
