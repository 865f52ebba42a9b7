// Starts the service: migrate, build, listen; on SIGTERM/SIGINT drain in-flight requests and close.
import type { FastifyInstance } from 'fastify'
import { hasAnyAccount } from './accounts/accounts.store.js'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import { migrateToLatest } from './db/migrate.js'
import { closeDeps, createDeps } from './deps.js'
import { purgeExpiredEvents } from './events/events.store.js'
import { purgeExpiredIdempotencyKeys } from './idempotency/idempotency.js'
import { purgeSignInFailures, SIGN_IN_WINDOW_MS } from './rate-limit/sign-in-throttle.js'

export interface RunningServer {
  app: FastifyInstance
  address: string
  hasAccounts: boolean
  close(): Promise<void>
}

export async function startServer(config: Config): Promise<RunningServer> {
  const deps = createDeps(config)
  try {
    await deps.start()
    await migrateToLatest(deps.database)
  } catch (error) {
    await closeDeps(deps).catch(() => {})
    throw error
  }
  const app = await buildApp(deps)
  try {
    await app.listen({ port: config.port, host: config.host })
  } catch (error) {
    // A port in use: close what holds the event loop open (the pool, the LISTEN client, Redis),
    // or the process would print the error and hang instead of exiting.
    await app.close().catch(() => {})
    await closeDeps(deps).catch(() => {})
    throw error
  }
  // Expired idempotency keys, sign-in failures and events past EVENT_RETENTION_DAYS are purged at
  // start and then hourly (events in batches: see purgeExpiredEvents).
  const purge = () =>
    Promise.all([
      purgeExpiredIdempotencyKeys(deps.database.db, deps.clock.now()),
      purgeSignInFailures(deps.database.db, deps.clock.now(), SIGN_IN_WINDOW_MS),
      purgeExpiredEvents(deps.database.db, deps.clock.now(), config.eventRetentionDays),
    ]).catch((error) => app.log.warn({ err: error }, 'purging expired rows failed'))
  await purge()
  const purgeTimer = setInterval(purge, 3600_000)
  purgeTimer.unref()
  const hasAccounts = await hasAnyAccount(deps.database.db)

  let closing: Promise<void> | undefined
  const close = () => {
    // app.close() stops accepting, lets in-flight requests finish, then we close the database.
    clearInterval(purgeTimer)
    closing ??= app.close().then(() => closeDeps(deps))
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
