// OpenTelemetry traces (docs/operations.md#tracing), with the official SDK, loaded only when
// OTEL_EXPORTER_OTLP_ENDPOINT (or its traces variant) is set: without it nothing of OpenTelemetry
// is imported, and every function here is a no-op. The standard OTEL_* variables apply (protocol,
// headers, service name, sampler, batch sizes: span-export.ts). Spans: one per request (named by
// route template), one per database statement, one per webhook attempt (its context is the
// traceparent the receiver gets), one per background job.
import { randomBytes } from 'node:crypto'
import type { Span, Tracer } from '@opentelemetry/api'
import type { FastifyInstance } from 'fastify'
import type { CompiledQuery, DatabaseConnection, Dialect, QueryResult } from 'kysely'
import type { DropReason } from './span-export.js'

type Api = typeof import('@opentelemetry/api')

interface Tracing {
  api: Api
  tracer: Tracer
  shutdown(): Promise<void>
}

let tracing: Tracing | undefined

/** Spans that never reached the collector, by why, since the process started. */
const dropped: Record<DropReason, number> = { queue_full: 0, export_failed: 0 }

/** The spans dropped so far, by why; undefined while tracing is off (metrics.ts). */
export const spansDropped = (): Readonly<Record<DropReason, number>> | undefined => (tracing ? dropped : undefined)

/** Whether the SDK runs in this process (startTracing started it). */
export const tracingOn = (): boolean => tracing !== undefined

/** Whether this process exports traces: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set. */
export const tracingWanted = (env: NodeJS.ProcessEnv): boolean =>
  Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)

/** Starts the SDK when the environment asks for it; before the database and the app are built. */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (tracing || !tracingWanted(env) || env.OTEL_SDK_DISABLED === 'true') {
    return
  }
  const [api, { NodeSDK }, { countedSpanProcessor }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-node'),
    import('./span-export.js'),
  ])
  const spanProcessor = await countedSpanProcessor(env, {
    count: (reason, spans) => {
      dropped[reason] += spans
    },
  })
  // Traces only: metrics stay Prometheus's (/metrics), logs stay on stdout.
  const sdk = new NodeSDK({
    instrumentations: [],
    serviceName: env.OTEL_SERVICE_NAME ?? 'contacts-api',
    spanProcessors: [spanProcessor],
  })
  sdk.start()
  tracing = { api, tracer: api.trace.getTracer('contacts-api'), shutdown: () => sdk.shutdown() }
}

/** A collector that is down must not hold a stopping process (the exporter's own timeout is 10 s). */
const SHUTDOWN_MAX_MS = 2000

/** Sends what is still batched, for SHUTDOWN_MAX_MS at most; at shutdown. */
export async function stopTracing(): Promise<void> {
  const current = tracing
  tracing = undefined
  if (current) {
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, SHUTDOWN_MAX_MS).unref())
    await Promise.race([current.shutdown().catch(() => {}), timeout])
  }
}

/** The trace and span of the code running now, for a log line; {} when there is none. */
export function traceFields(): Record<string, string> {
  const span = tracing?.api.trace.getActiveSpan()
  if (!span) {
    return {}
  }
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}

/**
 * A server span per request, named by its route template, continuing an incoming traceparent; the
 * rest of the request runs in its context, so statements and log lines are its children.
 */
export function traceRequests(app: FastifyInstance): void {
  const on = tracing
  if (!on) {
    return
  }
  const { api, tracer } = on
  const spans = new WeakMap<object, Span>()
  app.addHook('onRequest', (request, reply, done) => {
    const parent = api.propagation.extract(api.context.active(), request.headers)
    const route = request.routeOptions.url ?? 'unknown route'
    const span = tracer.startSpan(
      `${request.method} ${route.replace(/:(\w+)/g, '{$1}')}`,
      {
        kind: api.SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          'http.route': route,
          'url.path': request.url.split('?')[0] ?? '',
        },
      },
      parent,
    )
    spans.set(reply, span)
    api.context.with(api.trace.setSpan(parent, span), done)
  })
  app.addHook('onResponse', (_request, reply, done) => {
    const span = spans.get(reply)
    if (span) {
      span.setAttribute('http.response.status_code', reply.statusCode)
      if (reply.statusCode >= 500) {
        span.setStatus({ code: api.SpanStatusCode.ERROR })
      }
      span.end()
    }
    done()
  })
}

/**
 * The dialect with a span around each statement its connections run, named by its kind and first
 * table (never a value): builders, precompiled statements and raw SQL alike. Only within a request
 * or a job (an active span): the worker's polls and the outcome writes between attempts would
 * otherwise each be a trace of one span. The dialect itself when tracing is off.
 */
export function traceStatements(dialect: Dialect): Dialect {
  const on = tracing
  if (!on) {
    return dialect
  }
  const { api, tracer } = on
  const traced = new WeakSet<DatabaseConnection>()
  const wrap = (connection: DatabaseConnection): DatabaseConnection => {
    if (traced.has(connection)) {
      return connection
    }
    traced.add(connection)
    // In place: the driver gets its own connection object back when it is released.
    const execute = connection.executeQuery.bind(connection)
    connection.executeQuery = <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      if (api.trace.getActiveSpan() === undefined) {
        return execute<R>(query)
      }
      const { name, operation } = statementOf(query)
      const span = tracer.startSpan(name, { kind: api.SpanKind.CLIENT, attributes: { 'db.operation.name': operation } })
      return execute<R>(query).finally(() => span.end())
    }
    return connection
  }
  return {
    createAdapter: () => dialect.createAdapter(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createDriver() {
      const driver = dialect.createDriver()
      const acquire = driver.acquireConnection.bind(driver)
      driver.acquireConnection = async () => wrap(await acquire())
      return driver
    },
  }
}

const STATEMENT = /^\s*(?:with\b.*?\)\s*)?(select|insert|update|delete)\b(.*)$/is
/** The first table: after `update`, or after the first `from` or `into`. */
const TABLE_AFTER = { update: /^\s*"?(\w+)/, other: /\b(?:from|into)\s+"?(\w+)/i }

/** A statement's span name, `select contacts`, and its kind; read from its text, once per text. */
const statementNames = new Map<string, { name: string; operation: string }>()
function statementOf(query: CompiledQuery): { name: string; operation: string } {
  let known = statementNames.get(query.sql)
  if (known === undefined) {
    const [, verb, rest = ''] = STATEMENT.exec(query.sql) ?? []
    const operation = (verb ?? query.sql.trim().split(/\s/, 1)[0] ?? 'statement').toLowerCase()
    const table = verb ? (operation === 'update' ? TABLE_AFTER.update : TABLE_AFTER.other).exec(rest)?.[1] : undefined
    known = { name: table ? `${operation} ${table}` : operation, operation }
    // Statements are few and reused; a bound keeps an unusual caller from growing it for ever.
    if (statementNames.size < 1000) {
      statementNames.set(query.sql, known)
    }
  }
  return known
}

/**
 * Runs one webhook attempt in a client span and hands it the traceparent to send, the span's own;
 * without tracing, a fresh unsampled one, so a receiver can still tie its work to the call.
 */
export async function traceDelivery<T>(
  attributes: Record<string, string>,
  attempt: (traceparent: string) => Promise<T & { statusCode: number | null; ok: boolean }>,
): Promise<T & { statusCode: number | null; ok: boolean }> {
  const on = tracing
  if (!on) {
    return attempt(`00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`)
  }
  const { api, tracer } = on
  return tracer.startActiveSpan('webhook delivery', { kind: api.SpanKind.CLIENT, attributes }, async (span) => {
    const { traceId, spanId, traceFlags } = span.spanContext()
    try {
      const result = await attempt(`00-${traceId}-${spanId}-0${traceFlags.toString(16)}`)
      if (result.statusCode !== null) {
        span.setAttribute('http.response.status_code', result.statusCode)
      }
      if (!result.ok) {
        span.setStatus({ code: api.SpanStatusCode.ERROR })
      }
      return result
    } finally {
      span.end()
    }
  })
}

/** Runs a background job (a purge, an import) in a span of its own, a root span. */
export async function traceJob<T>(
  name: string,
  job: () => Promise<T>,
  attributes: Record<string, string> = {},
): Promise<T> {
  const on = tracing
  if (!on) {
    return job()
  }
  return on.tracer.startActiveSpan(name, { root: true, attributes }, async (span) => {
    try {
      return await job()
    } catch (error) {
      span.setStatus({ code: on.api.SpanStatusCode.ERROR })
      throw error
    } finally {
      span.end()
    }
  })
}
