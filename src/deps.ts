// The composition root: everything the app needs, built once from the config and passed down.
import { randomBytes } from 'node:crypto'
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { Redis } from 'ioredis'
import { createTestDataPurger, type TestDataPurger } from './accounts/test-data.js'
import { KEY_REVOCATIONS_CHANNEL, type KeyRevocations } from './api-keys/key-revocations.js'
import {
  CACHE_TTL_PUSHED_MS,
  CACHE_TTL_UNPUSHED_MS,
  createKeyVerifier,
  type KeyVerifier,
} from './api-keys/key-verifier.js'
import type { Config } from './config.js'
import { type ContactService, createContactService } from './contacts/contact-service.js'
import { type DatabaseHandle, openDatabase } from './db/database.js'
import { createFeedCommits, FEED_CHANNEL, type FeedCommits } from './events/feed-commits.js'
import { createFeedProbe, type FeedProbe } from './events/feed-probe.js'
import { createFeedSignal, type FeedSignal } from './events/feed-signal.js'
import { createImportRunner, type ImportRunner } from './imports/import-runner.js'
import { type Broadcast, localBroadcast, postgresBroadcast, postgresListener, redisBroadcast } from './lib/broadcast.js'
import { type Clock, systemClock } from './lib/clock.js'
import { createMetrics, type Metrics } from './observability/metrics.js'
import { createRateLimiter, type RateLimiter } from './rate-limit/rate-limit.js'
import { memoryBuckets, redisBucketStore, redisBuckets } from './rate-limit/token-bucket.js'
import { leasedBuckets } from './rate-limit/token-lease.js'
import { createRequestLogWriter, type RequestLogWriter } from './request-logs/request-log-writer.js'
import type { WebhookActionsDeps } from './webhooks/endpoint-lifecycle.js'
import { webhookSecretKey } from './webhooks/secrets.js'
import { defaultResolver, type Resolver } from './webhooks/webhook-url.js'

/** A start that failed for a reason the operator can fix, stated in one line that names the setting. */
export class StartError extends Error {}

export interface Deps {
  readonly config: Config
  readonly database: DatabaseHandle
  readonly clock: Clock
  readonly keyVerifier: KeyVerifier
  readonly keyRevocations: KeyRevocations
  readonly rateLimiter: RateLimiter
  readonly metrics: Metrics
  readonly redis: Redis | undefined
  /** Signs cursors and CSRF tokens: config.secret, or the one kept in the SQLite data dir. */
  readonly secret: string
  /** The one way contacts are written (src/contacts/contact-service.ts). */
  readonly contacts: ContactService
  /** Runs CSV import jobs off the request path; `serve` starts its polling. */
  readonly imports: ImportRunner
  /** Deletes the test data of accounts that asked for it, off the request path (src/accounts/test-data.ts). */
  readonly testData: TestDataPurger
  /** Writes the request log in batches off the request path (src/request-logs/request-log-writer.ts). */
  readonly requestLog: RequestLogWriter
  /** Wakes the long polls of the events feed when this instance commits an event (src/events/feed-signal.ts). */
  readonly feedSignal: FeedSignal
  /** Commits to the feed, told to this process's long polls and worker and to the other instances (src/events/feed-commits.ts). */
  readonly feedCommits: FeedCommits
  /** What waiting long polls ask, once per tenant, of the feed no signal announced (src/events/feed-probe.ts). */
  readonly feedProbe: FeedProbe
  /** Webhook endpoints' secret key, URL rules and host resolver (tests resolve names locally). */
  readonly webhooks: WebhookActionsDeps
  /** Connects what must be reachable before serving (Redis, the revocation listener). */
  start(): Promise<void>
  /** Closes what start() connected (the LISTEN connection). */
  stop(): Promise<void>
}

export function createDeps(
  config: Config,
  overrides: { database?: DatabaseHandle; clock?: Clock; resolve?: Resolver } = {},
): Deps {
  const database = overrides.database ?? openDatabase(config.database)
  const clock = overrides.clock ?? systemClock
  const metrics = createMetrics(database)
  // Commands fail fast instead of queueing while Redis is away; the callers fail open.
  const redis = config.redisUrl
    ? new (loadRedis())(config.redisUrl, {
        lazyConnect: true,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        commandTimeout: 500,
      })
    : undefined
  redis?.on('error', () => {
    // Reported where a command fails; ioredis reconnects by itself.
  })

  // Without Redis, PostgreSQL's NOTIFY, heard on one LISTEN connection for every channel.
  const notifyDatabase =
    !redis && config.database.kind === 'postgres' && !overrides.database ? config.database : undefined
  const listenAt = notifyDatabase && listenUrl(notifyDatabase)
  const listener = listenAt === undefined ? undefined : postgresListener(listenAt)
  /** A channel to every instance: Redis when there is one, else PostgreSQL's NOTIFY, else none. */
  const broadcastOn = (channel: string, onMessage: (message: string) => void): Broadcast =>
    redis
      ? redisBroadcast(redis, channel, onMessage)
      : notifyDatabase
        ? postgresBroadcast(listener, database.db, channel, onMessage)
        : localBroadcast(onMessage)
  let onRevoked: (keyHash: string) => void = () => {}
  const keyRevocations = broadcastOn(KEY_REVOCATIONS_CHANNEL, (keyHash) => onRevoked(keyHash))
  const keyVerifier = createKeyVerifier(
    database.db,
    clock,
    config.keyPrefix,
    keyRevocations.shared ? CACHE_TTL_PUSHED_MS : CACHE_TTL_UNPUSHED_MS,
  )
  onRevoked = (keyHash) => keyVerifier.invalidate(keyHash)

  const rateLimiter = createRateLimiter(
    !redis
      ? memoryBuckets(() => clock.now().getTime())
      : config.rateLimit.lease > 1
        ? leasedBuckets(redisBucketStore(redis), { leaseMax: config.rateLimit.lease })
        : redisBuckets(redis),
    { rate: config.rateLimit.perSecond, burst: config.rateLimit.burst },
    config.rateLimit.authFailuresPerMinute,
    () => metrics.rateLimitStoreErrors.inc(),
    (kind) => metrics.rateLimitRejections.inc({ kind }),
  )

  const secret = config.secret ?? localSecret(config)
  const feedSignal = createFeedSignal()
  const feedCommits = createFeedCommits(feedSignal)
  const feedBroadcast = broadcastOn(FEED_CHANNEL, (message) => feedCommits.received(message))
  feedCommits.connect(feedBroadcast)
  const contacts = createContactService({
    onCommitted: (tenantId) => feedCommits.committed(tenantId),
    db: database.db,
    clock,
    maxContacts: config.maxContactsPerAccount,
    maxTestContacts: config.maxTestContactsPerAccount,
  })
  return {
    config,
    database,
    clock,
    keyVerifier,
    keyRevocations,
    rateLimiter,
    metrics,
    redis,
    secret,
    contacts,
    testData: createTestDataPurger({ db: database.db, contacts, clock }),
    feedSignal,
    feedCommits,
    feedProbe: createFeedProbe(database.db),
    requestLog: createRequestLogWriter({
      db: database.db,
      maxPerDay: config.requestLog.maxPerDay,
      count: (outcome, entries) => metrics.requestLogEntries.inc({ outcome }, entries),
    }),
    imports: createImportRunner({
      db: database.db,
      contacts,
      clock,
      maxConcurrent: config.imports.concurrency,
      ...(config.imports.leaseMs === undefined ? {} : { leaseMs: config.imports.leaseMs }),
      sqliteFile: database.sqliteFile,
    }),
    webhooks: {
      db: database.db,
      secretKey: webhookSecretKey(secret),
      allowPrivateUrls: config.webhooks.allowPrivateUrls,
      resolve: overrides.resolve ?? defaultResolver,
    },
    async stop() {
      await listener?.close()
    },
    async start() {
      if (redis) {
        // ioredis retries the first connection forever: give it 3 s, then say so plainly.
        redis.connect().catch(() => {})
        const ready = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('no answer within 3 s')), 3000)
          redis.once('ready', () => {
            clearTimeout(timer)
            resolve()
          })
        })
        try {
          await ready
          await redis.ping()
        } catch (error) {
          redis.disconnect()
          throw new StartError(
            `REDIS_URL is set but Redis is unreachable (${config.redisUrl}): ${(error as Error).message}`,
          )
        }
      }
      try {
        await keyRevocations.start()
        await feedBroadcast.start()
        await listener?.start()
      } catch (error) {
        // The LISTEN connection: DATABASE_DIRECT_URL when set (the first connection made there).
        const setting =
          config.database.kind === 'postgres' && config.database.directUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL'
        throw new StartError(
          `${setting}: cannot LISTEN for key revocations and feed commits there: ${error instanceof Error ? error.message : String(error)}`,
        )
      }
    },
  }
}

/**
 * ioredis is loaded only when REDIS_URL is set: most single instances have no Redis
 * (docs/design.md#operations). It is CommonJS, so a synchronous require keeps createDeps synchronous.
 */
function loadRedis(): typeof Redis {
  return (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis
}

/** Where LISTEN can hear every NOTIFY: past the pooler, if there is one; undefined when nowhere. */
function listenUrl(database: Extract<Config['database'], { kind: 'postgres' }>): string | undefined {
  return database.directUrl ?? (database.pooler === 'transaction' ? undefined : database.url)
}

/**
 * Behind a transaction pooler with neither DATABASE_DIRECT_URL nor REDIS_URL no revocation push
 * reaches this instance, so keys are cached briefly instead (docs/design.md#authentication). Said at start.
 */
export function revocationPushWarning(config: Config): string | undefined {
  const { database } = config
  if (database.kind !== 'postgres' || database.pooler !== 'transaction' || database.directUrl || config.redisUrl) {
    return undefined
  }
  return 'DATABASE_POOLER=transaction without DATABASE_DIRECT_URL or REDIS_URL: revocations made on other instances are not pushed here; verified keys are cached for 1 s instead of 5 s, which bounds the delay'
}

export async function closeDeps(deps: Deps): Promise<void> {
  // First: what is still pending of the request log is written while the database is open.
  await deps.requestLog.stop()
  await deps.testData.stop()
  await deps.imports.stop()
  await deps.imports.close()
  await deps.keyVerifier.close()
  await deps.keyRevocations.close()
  await deps.feedCommits.close()
  await deps.stop()
  deps.redis?.disconnect()
  await deps.database.close()
}

/** Where the generated secret of an SQLite database is kept: beside it. */
export const localSecretFile = (databasePath: string): string => path.join(path.dirname(databasePath), 'secret')

/** On SQLite the secret is generated at first start and kept beside the database (mode 0600). */
function localSecret(config: Config): string {
  if (config.database.kind !== 'sqlite' || config.database.path === ':memory:') {
    return randomBytes(32).toString('hex')
  }
  const file = localSecretFile(config.database.path)
  try {
    writeFileSync(file, randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw error
    }
  }
  // A secret that another user could read, write or have put there (as in /tmp) is refused, not used.
  const stat = statSync(file)
  const uid = process.getuid?.()
  if (uid !== undefined && (stat.uid !== uid || (stat.mode & 0o077) !== 0)) {
    throw new StartError(
      `${file} (the secret beside the SQLite database) must belong to this user and be readable by it alone (mode 0600; it is ${(stat.mode & 0o777).toString(8)}, owner uid ${stat.uid}). Run: chmod 600 ${file}, or delete it to have a new one made (signed cursors and sessions then end).`,
    )
  }
  return readFileSync(file, 'utf8').trim()
}
