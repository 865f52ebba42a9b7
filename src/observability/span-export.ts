// The way spans leave the process: the OTLP exporter the environment names, behind the SDK's batch
// processor, with every span that never reaches the collector counted by why (tracing.ts exposes
// the counts as otel_spans_dropped_total). Loaded only when tracing is on.
import { ExportResultCode } from '@opentelemetry/core'
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace'

export type DropReason = 'queue_full' | 'export_failed'

export interface SpanDrops {
  count(reason: DropReason, spans: number): void
}

/** The SDK's default queue, when OTEL_BSP_MAX_QUEUE_SIZE is not set. */
const DEFAULT_MAX_QUEUE_SIZE = 2048

const SAMPLED = 1

/** The span processor for OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, its batch set by the OTEL_BSP_* variables. */
export async function countedSpanProcessor(env: NodeJS.ProcessEnv, drops: SpanDrops): Promise<SpanProcessor> {
  const number = (name: string): number | undefined => {
    const value = Number(env[name])
    return env[name]?.trim() && Number.isFinite(value) && value >= 0 ? value : undefined
  }
  const maxQueueSize = number('OTEL_BSP_MAX_QUEUE_SIZE') ?? DEFAULT_MAX_QUEUE_SIZE
  let queued = 0
  const exporter = await otlpExporter(env)
  const counted: SpanExporter = {
    export(spans, done) {
      exporter.export(spans, (result) => {
        queued -= spans.length
        if (result.code !== ExportResultCode.SUCCESS) {
          drops.count('export_failed', spans.length)
        }
        done(result)
      })
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  }
  const batch = new BatchSpanProcessor({
    exporter: counted,
    maxQueueSize,
    scheduledDelayMillis: number('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: number('OTEL_BSP_EXPORT_TIMEOUT'),
    maxExportBatchSize: number('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  })
  // The batch processor drops a span silently when its queue is full; the same bound here, kept
  // by counting what it holds until its export answers, lets the drop be counted.
  return {
    onStart: (span, context) => batch.onStart(span, context),
    onEnd(span: ReadableSpan) {
      if ((span.spanContext().traceFlags & SAMPLED) === 0) {
        return
      }
      if (queued >= maxQueueSize) {
        drops.count('queue_full', 1)
        return
      }
      queued += 1
      batch.onEnd(span)
    },
    forceFlush: () => batch.forceFlush(),
    shutdown: () => batch.shutdown(),
  }
}

async function otlpExporter(env: NodeJS.ProcessEnv): Promise<SpanExporter> {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? '').trim()
  switch (protocol) {
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter()
    default:
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter()
  }
}
