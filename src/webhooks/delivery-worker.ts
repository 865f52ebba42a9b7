// The delivery worker: a loop that fans events out, claims due deliveries endpoint by endpoint,
// sends each and records the outcome (docs/design.md#delivery-queue). Runs inside `serve` or as
// `contacts-api worker`; any number of them can share one database.
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { Clock } from '../lib/clock.js'
import type { Metrics } from '../observability/metrics.js'
import { traceDelivery } from '../observability/tracing.js'
import { type Attempt, type AttemptRecord, recordAttempts } from './delivery-attempts.js'
import { type ClaimedDelivery, claimDeliveries, dueEndpoints, releaseClaimed } from './delivery-claim.js'
import { DISPATCH_BATCH, dispatchEvents } from './delivery-dispatch.js'
import { type EndpointRow, liveSecrets } from './endpoints.store.js'
import { deliveryPayload } from './payload.js'
import { webhookHeaders } from './signing.js'
import { type DeliveryResult, EndpointConnections, postWebhook } from './webhook-post.js'
import type { Resolver } from './webhook-url.js'

export interface DeliveryWorkerOptions {
  db: Kysely<Database>
  clock: Clock
  metrics: Pick<Metrics, 'webhookDeliveries' | 'webhookDeliveryLag'>
  log: { warn(object: object, message: string): void }
  /** Decrypts endpoints' signing secrets (secrets.ts webhookSecretKey). */
  secretKey: Buffer
  timeoutMs: number
  retryScheduleS: readonly number[]
  allowPrivateUrls: boolean
  resolve?: Resolver
  /** How often to look for work when nothing woke the loop. */
  pollMs?: number
  /** Attempts under way at once, in all. */
  concurrency?: number
  /** Attempts under way at once to one endpoint: a slow or dead receiver holds no more slots than this. */
  perEndpoint?: number
  random?: () => number
  /** Tests only: the lease's room beyond timeoutMs (default LEASE_MARGIN_MS). */
  leaseMarginMs?: number
}

export interface DeliveryWorker {
  /** Look for work now rather than at the next poll (the loop calls it when a slot frees; tests too). */
  wake(): void
  /** Stops claiming, waits for the attempts under way to be recorded. */
  stop(): Promise<void>
}

export const WORKER_DEFAULTS = { pollMs: 50, concurrency: 64, perEndpoint: 8 } as const
// An attempt lasts at most timeoutMs; the lease adds room for recording it before another worker
// may take the delivery over.
const LEASE_MARGIN_MS = 30_000
const ERROR_BACKOFF_MS = 1000
// An endpoint's deliveries claimed at once at most, per slot of it: those beyond its slots wait
// here, claimed, to start the moment a slot frees.
const CLAIMED_PER_SLOT = 2
// Outcomes recorded in one transaction at most (recordAttempts).
const RECORD_BATCH = 64
const CONNECTIONS_IDLE_MS = 60_000

export function startDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { db, clock, metrics, log } = options
  const pollMs = options.pollMs ?? WORKER_DEFAULTS.pollMs
  const concurrency = options.concurrency ?? WORKER_DEFAULTS.concurrency
  const perEndpoint = options.perEndpoint ?? WORKER_DEFAULTS.perEndpoint
  const leaseMs = options.timeoutMs + (options.leaseMarginMs ?? LEASE_MARGIN_MS)
  const policy = { scheduleS: options.retryScheduleS, random: options.random ?? Math.random }
  const inFlight = new Map<string, number>()
  // Each endpoint's keep-alive connections (webhook-post.ts), closed once unused for a minute.
  const connections = new Map<string, { pool: EndpointConnections; usedAt: number }>()
  let prunedAt = Date.now()
  const connectionsOf = (key: string): EndpointConnections => {
    let entry = connections.get(key)
    if (!entry) {
      entry = { pool: new EndpointConnections(perEndpoint), usedAt: 0 }
      connections.set(key, entry)
    }
    entry.usedAt = Date.now()
    return entry.pool
  }
  const pruneConnections = (all: boolean) => {
    prunedAt = Date.now()
    for (const [key, entry] of connections) {
      if (all || (prunedAt - entry.usedAt > CONNECTIONS_IDLE_MS && !inFlight.has(key))) {
        entry.pool.close()
        connections.delete(key)
      }
    }
  }
  const attempts = new Set<Promise<void>>()
  // Claimed ahead, per endpoint: each starts the moment one of the endpoint's slots frees, without
  // waiting for the loop's next claim (its lease runs meanwhile, as for one under way).
  const ready = new Map<string, { endpoint: EndpointRow; deliveries: ClaimedDelivery[] }>()
  const readyTotal = (): number => {
    let total = 0
    for (const queue of ready.values()) {
      total += queue.deliveries.length
    }
    return total
  }
  let inFlightTotal = 0
  let stopped = false
  let woken = false
  let wakeUp: (() => void) | undefined

  const wake = () => {
    woken = true
    wakeUp?.()
  }

  // Outcomes that finish while a batch is being written make the next batch: one commit per batch.
  // An attempt's slot is freed once its outcome is recorded.
  const toRecord: Array<{
    attempt: Attempt
    resolve: (record: AttemptRecord) => void
    reject: (error: unknown) => void
  }> = []
  let recording = false

  function record(attempt: Attempt): Promise<AttemptRecord> {
    return new Promise((resolve, reject) => {
      toRecord.push({ attempt, resolve, reject })
      if (!recording) {
        recording = true
        void recordBatches()
      }
    })
  }

  async function recordBatches(): Promise<void> {
    // Attempts finishing in this turn of the event loop join the first batch.
    await new Promise((resolve) => setImmediate(resolve))
    while (toRecord.length > 0) {
      const batch = toRecord.splice(0, RECORD_BATCH)
      try {
        const records = await recordAttempts(
          db,
          batch.map((entry) => entry.attempt),
          policy,
          clock.now(),
        )
        for (const [i, entry] of batch.entries()) {
          entry.resolve(records[i] as AttemptRecord)
        }
      } catch (error) {
        for (const entry of batch) {
          entry.reject(error)
        }
      }
    }
    recording = false
  }

  /** Attempts one delivery; resolves with its outcome's recording once the receiver has answered. */
  async function send(
    endpoint: EndpointRow,
    delivery: ClaimedDelivery,
  ): Promise<{ recorded: Promise<void>; gone: boolean }> {
    const startedAt = clock.now()
    if (delivery.attempts === 0) {
      metrics.webhookDeliveryLag.observe(
        Math.max(0, startedAt.getTime() - Date.parse(delivery.event_created_at)) / 1000,
      )
    }
    const body = deliveryPayload(delivery, delivery.event_body ?? undefined)
    let secrets: string[] | undefined
    try {
      secrets = liveSecrets(endpoint, options.secretKey, startedAt)
    } catch {
      // Sealed under another SECRET: sending unsigned is not an option; record a failure the tenant
      // sees (and that counts toward `failing`) rather than stall the delivery in silence.
    }
    let result: DeliveryResult
    if (body === undefined) {
      // Its event was purged (EVENT_RETENTION_DAYS) before it could be sent: nothing left to send.
      result = { ok: false, statusCode: null, durationMs: 0, excerpt: '', error: 'event expired' }
    } else if (secrets === undefined) {
      result = { ok: false, statusCode: null, durationMs: 0, excerpt: '', error: 'signing secret unreadable' }
    } else {
      const headers = webhookHeaders({ eventId: delivery.event_id, timestamp: startedAt, body, secrets })
      const attributes = { 'webhook.endpoint_id': endpoint.id, 'webhook.delivery_id': delivery.id }
      result = await traceDelivery(attributes, (traceparent) =>
        postWebhook({
          traceparent,
          url: endpoint.url,
          headers,
          body,
          timeoutMs: options.timeoutMs,
          allowPrivate: options.allowPrivateUrls,
          connections: connectionsOf(`${endpoint.account_id} ${endpoint.id}`),
          ...(options.resolve ? { resolve: options.resolve } : {}),
        }),
      )
    }
    const recorded = record({ delivery, startedAt, result, final: body === undefined }).then((outcome) => {
      if (outcome.status !== 'stale') {
        metrics.webhookDeliveries.inc({ outcome: outcome.status })
      }
      if (outcome.disabled) {
        // disableEndpoint failed them in the database: none is sent.
        ready.delete(`${endpoint.account_id} ${endpoint.id}`)
      }
    })
    return { recorded, gone: !result.ok && result.statusCode === 410 }
  }

  /**
   * An endpoint's slot is its receiver's: freed when the receiver has answered, so the next claim
   * need not wait for the outcome's commit. The worker's slot (concurrency) is held until the
   * outcome is recorded, which bounds what waits to be written.
   */
  function start(endpoint: EndpointRow, delivery: ClaimedDelivery): void {
    const key = `${endpoint.account_id} ${endpoint.id}`
    inFlight.set(key, (inFlight.get(key) ?? 0) + 1)
    inFlightTotal++
    let receiverFreed = false
    const freeReceiver = () => {
      if (receiverFreed) {
        return
      }
      receiverFreed = true
      const left = (inFlight.get(key) ?? 1) - 1
      if (left === 0) {
        inFlight.delete(key)
      } else {
        inFlight.set(key, left)
      }
      startReady(key)
      wake()
    }
    const attempt = send(endpoint, delivery)
      .then(({ recorded, gone }) => {
        // A 410 disables the endpoint: nothing more is sent to it before that is recorded.
        if (!gone) {
          freeReceiver()
        }
        return recorded
      })
      .catch((error: unknown) => {
        // Its lease runs out and another attempt is made: at least once, still.
        log.warn({ err: error, delivery: delivery.id }, 'webhook attempt could not be recorded')
      })
      .finally(() => {
        freeReceiver()
        inFlightTotal--
        attempts.delete(attempt)
        wake()
      })
    attempts.add(attempt)
  }

  /** Starts the endpoint's claimed deliveries while it has free slots. */
  function startReady(key: string): void {
    const queue = ready.get(key)
    while (queue && queue.deliveries.length > 0 && (inFlight.get(key) ?? 0) < perEndpoint && !stopped) {
      start(queue.endpoint, queue.deliveries.shift() as ClaimedDelivery)
    }
    if (queue?.deliveries.length === 0) {
      ready.delete(key)
    }
  }

  /** At stop: the deliveries claimed but not started are due again at once, for any worker. */
  async function releaseReady(): Promise<void> {
    for (const { endpoint, deliveries } of ready.values()) {
      await releaseClaimed(db, endpoint, deliveries, clock.now())
    }
    ready.clear()
  }

  async function tick(): Promise<void> {
    if (Date.now() - prunedAt > CONNECTIONS_IDLE_MS) {
      pruneConnections(false)
    }
    while ((await dispatchEvents(db, clock.now())) === DISPATCH_BATCH && !stopped) {
      // a backlog: fan it all out before claiming
    }
    // What is claimed ahead is bounded like what is under way: at most `concurrency` in all.
    const free = concurrency - inFlightTotal - readyTotal()
    if (free <= 0) {
      return
    }
    // Endpoints whose slots here are full may come back too: ask for enough to see past them.
    for (const ref of await dueEndpoints(db, clock.now(), free + inFlight.size)) {
      const key = `${ref.accountId} ${ref.id}`
      const held = (inFlight.get(key) ?? 0) + (ready.get(key)?.deliveries.length ?? 0)
      const room = Math.min(CLAIMED_PER_SLOT * perEndpoint - held, concurrency - inFlightTotal - readyTotal())
      if (stopped || room <= 0) {
        continue
      }
      const claim = await claimDeliveries(db, ref, clock.now(), room, leaseMs)
      if (claim && claim.deliveries.length > 0) {
        const queue = ready.get(key)
        if (queue) {
          queue.endpoint = claim.endpoint
          queue.deliveries.push(...claim.deliveries)
        } else {
          ready.set(key, { endpoint: claim.endpoint, deliveries: [...claim.deliveries] })
        }
        startReady(key)
      }
    }
  }

  const loop = (async () => {
    while (!stopped) {
      woken = false
      let pause = pollMs
      try {
        await tick()
      } catch (error) {
        log.warn({ err: error }, 'webhook worker: database unavailable, retrying')
        pause = ERROR_BACKOFF_MS
      }
      if (!woken && !stopped) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pause)
          wakeUp = () => {
            clearTimeout(timer)
            resolve()
          }
        })
        wakeUp = undefined
      }
    }
  })()

  return {
    wake,
    async stop() {
      stopped = true
      wakeUp?.()
      await loop
      await releaseReady()
      await Promise.all([...attempts])
      pruneConnections(true)
    },
  }
}
