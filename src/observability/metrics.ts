// Prometheus metrics (prom-client), one registry per app so several apps in one process never collide.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { DatabaseHandle } from '../db/database.js'
import { AppError } from '../http/errors.js'
import { safeEqual } from '../lib/crypto.js'
import { createRequestMetrics, type RequestMetrics } from './request-metrics.js'
import { spansDropped } from './tracing.js'

export interface Metrics {
  readonly registry: Registry
  /** Requests by route and status, and their latency: recorded on every response (request-metrics.ts). */
  readonly http: RequestMetrics
  readonly httpRequests: RequestMetrics['requests']
  readonly rateLimitRejections: Counter<'kind'>
  readonly rateLimitStoreErrors: Counter
  /** Webhook delivery attempts by what the delivery became: succeeded, retrying, failed. */
  readonly webhookDeliveries: Counter<'outcome'>
  /** From an event's commit to its delivery's first attempt. */
  readonly webhookDeliveryLag: Histogram
  /** Request log entries by outcome: stored, capped (counted, not stored), failed (the write failed). */
  readonly requestLogEntries: Counter<'outcome'>
}

export function createMetrics(database: DatabaseHandle): Metrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const pool = database.poolStats
  if (pool) {
    new Gauge({
      name: 'db_pool_connections',
      help: 'PostgreSQL pool connections by state',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const stats = pool()
        this.set({ state: 'total' }, stats.total)
        this.set({ state: 'idle' }, stats.idle)
        this.set({ state: 'waiting' }, stats.waiting)
      },
    })
  }
  new Gauge({
    name: 'webhook_queue_depth',
    help: 'Webhook deliveries not yet final (pending or retrying), across accounts',
    registers: [registry],
    async collect() {
      // A scrape must answer while the database is away: the gauge is then left out of date.
      const row = await database.db
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('next_attempt_at', 'is not', null)
        .executeTakeFirst()
        .catch(() => undefined)
      if (row) {
        this.set(Number(row.n))
      }
    },
  })
  new Counter({
    name: 'otel_spans_dropped_total',
    help: 'Trace spans never sent to the OTLP collector, by reason (queue_full, export_failed); only while tracing is on',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      const dropped = spansDropped()
      this.reset()
      for (const [reason, spans] of Object.entries(dropped ?? {})) {
        this.inc({ reason }, spans)
      }
    },
  })
  const http = createRequestMetrics(registry)
  return {
    registry,
    http,
    httpRequests: http.requests,
    rateLimitRejections: new Counter({
      name: 'rate_limit_rejections_total',
      help: 'Requests refused with 429, by limit (account, failed_auth)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    rateLimitStoreErrors: new Counter({
      name: 'rate_limit_store_errors_total',
      help: 'Rate-limit checks skipped because the shared store (Redis) failed (fail open)',
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookDeliveryLag: new Histogram({
      name: 'webhook_delivery_lag_seconds',
      help: "From an event's commit to the first attempt of its delivery",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    requestLogEntries: new Counter({
      name: 'request_log_entries_total',
      help: 'Request log entries by outcome (stored; capped: counted, not stored; failed: the write failed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  }
}

/**
 * Records every response and serves GET /metrics (route patterns only: no ids, no accounts). Not
 * public: a scrape brings METRICS_TOKEN, or without one comes directly from this machine (loopback,
 * no forwarding header). Anything else gets the 404 of a route that does not exist.
 */
export function installMetrics(app: FastifyInstance, metrics: Metrics, token: string | undefined): void {
  // Not async: this runs on every response, and a promise per call costs more than the counting.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.http.record(
      request.method,
      request.routeOptions.url ?? 'unmatched',
      reply.statusCode,
      reply.elapsedTime / 1000,
    )
    done()
  })
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (!mayScrape(request, token)) {
      throw new AppError('not_found', 'There is nothing here.')
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics())
  })
}

const FORWARDING_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip']

function mayScrape(request: FastifyRequest, token: string | undefined): boolean {
  if (token !== undefined) {
    const given = Buffer.from(request.headers.authorization ?? '')
    return safeEqual(given, Buffer.from(`Bearer ${token}`))
  }
  const peer = request.socket.remoteAddress ?? ''
  const loopback = peer === '::1' || peer.startsWith('127.') || peer.startsWith('::ffff:127.')
  return loopback && FORWARDING_HEADERS.every((name) => request.headers[name] === undefined)
}
