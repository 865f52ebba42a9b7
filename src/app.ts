// buildApp(deps): the Fastify instance with the API, the web app and operations routes. Never listens.
// With `apiOnly` the web app and Swagger UI are left out and never loaded (docs/design.md#operations).

import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, LogController } from 'fastify'
import { accountsRoutes } from './accounts/accounts.routes.js'
import { secretScanningRoutes } from './api-keys/secret-scanning.routes.js'
import type { Config } from './config.js'
import { contactsBatchRoutes } from './contacts/contacts.batch.routes.js'
import { contactsRoutes } from './contacts/contacts.routes.js'
import type { Deps } from './deps.js'
import { eventsRoutes } from './events/events.routes.js'
import { requireApiKey, tenantIdOf } from './http/auth.js'
import { refuseUnevaluatedConditions } from './http/conditional.js'
import { limitPipelining } from './http/connection-limits.js'
import { AppError, clientErrorHandler, installErrorHandlers, sendProblem, statusOf, toAppError } from './http/errors.js'
import { BODY_LIMIT, installInputRules } from './http/input.js'
import { registerOpenApi } from './http/openapi.js'
import { cachedSerializers } from './http/serialization.js'
import { validatorCompiler } from './http/validation.js'
import { installIdempotency } from './idempotency/idempotency.js'
import { deriveKey } from './lib/crypto.js'
import { newId } from './lib/ids.js'
import { healthRoutes } from './observability/health.js'
import { loggerOptions, redactUrl, requestLineLogger } from './observability/logger.js'
import { installMetrics } from './observability/metrics.js'
import { traceRequests } from './observability/tracing.js'
import { logRequests } from './request-logs/request-log.hook.js'
import { requestLogsRoutes } from './request-logs/request-logs.routes.js'
import { webhookEndpointsRoutes } from './webhooks/webhook-endpoints.routes.js'

/** Fastify's form of TRUST_PROXY: a hop count becomes "the nearest n hops" (proxy-addr's own reading of a number). */
function trustProxyOption(
  trust: Config['trustProxy'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (trust === false) {
    return false
  }
  return typeof trust === 'number' ? (_address, hop) => hop < trust : [...trust]
}

export async function buildApp(
  deps: Deps,
  options: { logger?: boolean; logStream?: NodeJS.WritableStream; apiOnly?: boolean } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger === false ? false : loggerOptions(deps.config, options.logStream),
    // One line per request, written by the onResponse hook below.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => newId('request'),
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
    clientErrorHandler,
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    // A client that trickles its request is cut off, checked every second rather than Node's default,
    // so it holds a connection no longer than the timeout. Keep-alive outlives load balancers' usual 60 s.
    requestTimeout: deps.config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(10_000, deps.config.requestTimeoutMs),
      connectionsCheckingInterval: 1000,
    },
    connectionTimeout: 60_000,
    keepAliveTimeout: 72_000,
    // While draining, requests already on open connections are still served (not 503'd).
    return503OnClosing: false,
    // Long enough that a long or garbled id reaches the route and gets its 404.
    routerOptions: { maxParamLength: 500 },
    // request.ip from X-Forwarded-For only when the hop that sent it is trusted (TRUST_PROXY).
    trustProxy: trustProxyOption(deps.config.trustProxy),
    // Errors Fastify raises before routing (a badly encoded URL) get the same problem body.
    frameworkErrors: (error, request, reply) => {
      reply.headers(everyResponseHeaders(request.id))
      const problem = toAppError(error) ?? new AppError('invalid_request', 'The request could not be read.')
      // Hooks do not run on this path: write the request's log line here.
      request.log.info(
        { method: request.method, url: redactUrl(request.url), status: statusOf(problem.code) },
        'request',
      )
      return sendProblem(reply, problem)
    },
  }).withTypeProvider<TypeBoxTypeProvider>()

  // First of all, so every response, errors from later hooks too, carries these headers. Hooks on every
  // request take `done` rather than being async: no promise and microtask each.
  limitPipelining(app)
  traceRequests(app)
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(everyResponseHeaders(request.id))
    done()
  })
  app.setValidatorCompiler(validatorCompiler())
  installInputRules(app)
  installErrorHandlers(app)
  installNotFoundHandler(app)

  const requestLines = requestLineLogger(app.log)
  app.addHook('onResponse', (request, reply, done) => {
    requestLines.info(
      {
        reqId: request.id,
        method: request.method,
        url: redactUrl(request.url),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        account_id: tenantIdOf(request),
      },
      'request',
    )
    done()
  })

  installMetrics(app, deps.metrics, deps.config.metricsToken)
  deps.requestLog.reportErrorsTo((error) => app.log.warn({ err: error }, 'writing the request log failed'))
  await registerOpenApi(app, deps.config, { ui: options.apiOnly !== true })
  await app.register(healthRoutes, { deps })
  await app.register(
    async (api) => {
      requireApiKey(api, deps)
      logRequests(api, deps.requestLog)
      // Before the Idempotency-Key is claimed: a refused request leaves no answer behind.
      refuseUnevaluatedConditions(api)
      installIdempotency(api, deps.database.db, deps.clock, {
        answerKey: deriveKey(deps.secret, 'idempotent-answers'),
        keysPerAccount: deps.config.idempotencyKeysPerAccount,
      })
      await api.register(accountsRoutes, { deps })
      await api.register(contactsRoutes, { prefix: '/contacts', deps })
      await api.register(contactsBatchRoutes, { prefix: '/contacts', deps })
      await api.register(eventsRoutes, { prefix: '/events', deps })
      await api.register(webhookEndpointsRoutes, { prefix: '/webhook_endpoints', deps })
      await api.register(requestLogsRoutes, { prefix: '/request_logs', deps })
    },
    { prefix: '/api/v1' },
  )
  const { keys: scanningKeys, action } = deps.config.secretScanning
  if (scanningKeys) {
    const scanning = { keys: scanningKeys, action }
    await app.register(secretScanningRoutes, { prefix: '/api/v1/secret_scanning', deps, scanning })
  }
  if (options.apiOnly !== true) {
    const { webRoutes } = await import('./web/web.routes.js')
    await app.register(webRoutes, { deps })
  }
  return app
}

/** 404 for unknown paths; 405 with `Allow` when the path exists under other methods. */
function installNotFoundHandler(app: FastifyInstance): void {
  const routes: Array<{ pattern: RegExp; method: string }> = []
  app.addHook('onRoute', (route) => {
    const source = route.url
      .split('/')
      .map((part) =>
        part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('/')
    for (const method of [route.method].flat()) {
      routes.push({ pattern: new RegExp(`^${source}$`), method })
    }
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))]
    if (allowed.length > 0) {
      return sendProblem(
        reply,
        new AppError('method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}.`, {
          headers: { allow: allowed.join(', ') },
        }),
      )
    }
    return sendProblem(reply, new AppError('not_found', `Nothing is at ${request.method} ${path}.`))
  })
}

/** The headers of every response: its request id, no caching, no sniffing (docs/design.md#http-conventions). */
const everyResponseHeaders = (requestId: string) => ({
  'request-id': requestId,
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
})
