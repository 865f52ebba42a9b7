// Starts the service in one of its roles (docs/design.md#operations): migrate, build, listen, deliver
// webhooks; on SIGTERM/SIGINT drain requests and attempts under way, then close.
import Fastify, { type FastifyInstance } from 'fastify'
import { hasAnyAccount } from './accounts/accounts.store.js'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import { migrateToLatest } from './db/migrate.js'
import { closeDeps, createDeps, type Deps, revocationPushWarning } from './deps.js'
import { purgeExpiredEvents } from './events/events.store.js'
import { purgeExpiredIdempotencyKeys } from './idempotency/idempotency.js'
import { purgeFinishedImports } from './imports/imports.store.js'
import { healthRoutes } from './observability/health.js'
import { loggerOptions } from './observability/logger.js'
import { installMetrics } from './observability/metrics.js'
import { startTracing, stopTracing, traceJob, traceRequests } from './observability/tracing.js'
import { purgeSignInFailures, SIGN_IN_WINDOW_MS } from './rate-limit/sign-in-throttle.js'
import { purgeExpiredRequestLogs } from './request-logs/request-logs.store.js'
import { purgeExpiredSessions } from './users/sessions.store.js'
import { purgeExpiredDeliveries } from './webhooks/deliveries.store.js'
import type { DeliveryWorker } from './webhooks/delivery-worker.js'

export interface RunningServer {
  app: FastifyInstance
  address: string
  hasAccounts: boolean
  close(): Promise<void>
}

/** `serve`: API and web app; `api-only`: the API, its document and the probes; `worker`: webhooks only. */
export type Role = 'serve' | 'api-only' | 'worker'

export async function startServer(config: Config, role: Role = 'serve'): Promise<RunningServer> {
  // Before the database and the app exist: they take their spans' hooks when they are built.
  await startTracing()
  const deps = createDeps(config)
  try {
    await deps.start()
    await migrateToLatest(deps.database)
  } catch (error) {
    await closeDeps(deps).catch(() => {})
    throw error
  }
  const app = role === 'worker' ? await buildWorkerApp(deps) : await buildApp(deps, { apiOnly: role === 'api-only' })
  const pushWarning = revocationPushWarning(config)
  if (pushWarning) {
    app.log.warn(pushWarning)
  }
  if (config.webhooks.allowPrivateUrls) {
    app.log.warn('WEBHOOK_ALLOW_PRIVATE_URLS=true: webhooks may go to http: and private addresses (development only)')
  }
  try {
    await app.listen({ port: config.port, host: config.host })
  } catch (error) {
    // A port in use: close what holds the event loop open (the pool, the LISTEN client, Redis),
    // or the process would print the error and hang instead of exiting.
    await app.close().catch(() => {})
    await closeDeps(deps).catch(() => {})
    throw error
  }
  const worker = role === 'worker' || config.webhooks.worker ? await deliveryWorker(deps, app) : undefined
  // A commit, here or (with a shared broadcast) on another instance, has events to fan out: now,
  // not at the worker's next poll.
  if (worker) {
    deps.feedCommits.onBatch(() => worker.wake())
  }
  if (role === 'serve') {
    // CSV imports left unfinished by a crash resume here (src/imports/import-job.ts). Imports are
    // uploaded through the web app, so an API-only process leaves them to a full `serve`.
    deps.imports.start((error, job) => app.log.error({ err: error, import: job }, 'CSV import failed'))
    // So does a deletion of test data, asked for in the web app.
    deps.testData.start((error) => app.log.error({ err: error }, 'deleting test data failed'))
  }
  // Expired rows are purged at start and then hourly; events and deliveries in batches.
  const purge = () =>
    traceJob('purge expired rows', () =>
      Promise.all([
        purgeExpiredIdempotencyKeys(deps.database.db, deps.clock.now()),
        purgeSignInFailures(deps.database.db, deps.clock.now(), SIGN_IN_WINDOW_MS),
        purgeExpiredSessions(deps.database.db, deps.clock.now()),
        purgeExpiredEvents(deps.database.db, deps.clock.now(), config.eventRetentionDays),
        purgeExpiredDeliveries(deps.database.db, deps.clock.now(), config.eventRetentionDays),
        purgeFinishedImports(deps.database.db, deps.clock.now(), config.eventRetentionDays),
        purgeExpiredRequestLogs(deps.database.db, deps.clock.now(), config.requestLog.retentionDays),
      ]),
    ).catch((error) => app.log.warn({ err: error }, 'purging expired rows failed'))
  await purge()
  const purgeTimer = setInterval(purge, 3600_000)
  purgeTimer.unref()
  let hasAccounts: boolean
  try {
    hasAccounts = await hasAnyAccount(deps.database.db)
  } catch (error) {
    // Already listening: stop, or the process would keep serving after the CLI said it could not start.
    clearInterval(purgeTimer)
    await Promise.all([app.close(), worker?.stop(), deps.imports.stop()]).catch(() => {})
    await closeDeps(deps).catch(() => {})
    throw error
  }

  let closing: Promise<void> | undefined
  const close = () => {
    clearInterval(purgeTimer)
    if (!closing) {
      // A response under way at the signal (a long CSV export) keeps its connection alive: close it once
      // idle, or the close would wait keepAliveTimeout for the client to hang up.
      const sweep = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS)
      const served = app.close().finally(() => clearInterval(sweep))
      closing = Promise.all([served, worker?.stop(), deps.imports.stop()])
        .then(() => closeDeps(deps))
        .then(stopTracing)
    }
    return closing
  }
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      app.log.info({ signal }, 'shutting down')
      close().then(
        () => process.exit(0),
        (error) => {
          app.log.error({ err: error }, 'shutdown failed')
          process.exit(1)
        },
      )
    })
  }
  return { app, address: config.apiUrl, hasAccounts, close }
}

/** How often a closing server closes the connections that went idle since the signal. */
const IDLE_SWEEP_MS = 250

async function buildWorkerApp(deps: Deps): Promise<FastifyInstance> {
  const app = Fastify({ logger: loggerOptions(deps.config) })
  traceRequests(app)
  installMetrics(app, deps.metrics, deps.config.metricsToken)
  await app.register(healthRoutes, { deps })
  return app
}

/**
 * The delivery worker is imported only by a process that runs it: its `node:http` import makes Node
 * load its bundled undici, which an API-only process never needs (docs/design.md#operations).
 */
async function deliveryWorker(deps: Deps, app: FastifyInstance): Promise<DeliveryWorker> {
  const { startDeliveryWorker } = await import('./webhooks/delivery-worker.js')
  const { webhooks } = deps.config
  return startDeliveryWorker({
    db: deps.database.db,
    clock: deps.clock,
    metrics: deps.metrics,
    log: app.log,
    secretKey: deps.webhooks.secretKey,
    timeoutMs: webhooks.timeoutMs,
    retryScheduleS: webhooks.retryScheduleS,
    allowPrivateUrls: webhooks.allowPrivateUrls,
    resolve: deps.webhooks.resolve,
    ...(webhooks.leaseMarginMs === undefined ? {} : { leaseMarginMs: webhooks.leaseMarginMs }),
  })
}
