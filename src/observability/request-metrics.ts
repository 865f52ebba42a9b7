// http_requests_total and http_request_duration_seconds, tallied in plain numbers and turned into
// prom-client's values only when scraped: its inc() and observe() validate and hash a label object
// on every call (docs/performance.md, round 3). The exposition is the same.
import type { Metric, Registry } from 'prom-client'

export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

interface RouteTally {
  labels: { method: string; route: string }
  /** Responses per duration bucket (not cumulative); the last one is beyond the largest bound. */
  buckets: number[]
  sum: number
  count: number
  /** Responses by status code. */
  statuses: Map<number, number>
}

type RequestLabels = Record<'method' | 'route' | 'status', string>

/** A value as prom-client's registry reads it (`sharedLabels` come after `labels` in the text). */
interface ExposedValue {
  labels: Record<string, string | number>
  sharedLabels?: Record<string, string>
  value: number
  metricName?: string
}

export interface RequestMetrics {
  record(method: string, route: string, status: number, seconds: number): void
  /** http_requests_total's values, as prom-client's Counter.get() gives them. */
  readonly requests: { get(): Promise<{ name: string; values: Array<{ labels: RequestLabels; value: number }> }> }
}

export function createRequestMetrics(registry: Registry): RequestMetrics {
  // route → method → tally: two Map lookups on strings Fastify already has, no key to build.
  let tallies = new Map<string, Map<string, RouteTally>>()
  const all = function* (): Generator<RouteTally> {
    for (const byMethod of tallies.values()) {
      yield* byMethod.values()
    }
  }

  const requestsName = 'http_requests_total'
  const requestsHelp = 'HTTP requests by method, route pattern and status'
  const requestValues = () => {
    const values: Array<{ labels: RequestLabels; value: number }> = []
    for (const tally of all()) {
      for (const [status, count] of tally.statuses) {
        values.push({ labels: { ...tally.labels, status: String(status) }, value: count })
      }
    }
    return values
  }
  const requests = {
    name: requestsName,
    help: requestsHelp,
    type: 'counter',
    aggregator: 'sum',
    get: async () => ({
      name: requestsName,
      help: requestsHelp,
      type: 'counter',
      aggregator: 'sum',
      values: requestValues(),
    }),
    reset: () => {
      tallies = new Map()
    },
  }

  const durationName = 'http_request_duration_seconds'
  const durationHelp = 'HTTP request latency by method and route pattern'
  const duration = {
    name: durationName,
    help: durationHelp,
    type: 'histogram',
    aggregator: 'sum',
    // The form prom-client's Histogram gives the registry: `le` first, then the route's labels.
    getForPromString: async () => {
      const values: ExposedValue[] = []
      for (const tally of all()) {
        let cumulative = 0
        DURATION_BUCKETS.forEach((bound, i) => {
          cumulative += tally.buckets[i] ?? 0
          values.push({
            labels: { le: bound },
            sharedLabels: tally.labels,
            value: cumulative,
            metricName: `${durationName}_bucket`,
          })
        })
        values.push(
          {
            labels: { le: '+Inf' },
            sharedLabels: tally.labels,
            value: tally.count,
            metricName: `${durationName}_bucket`,
          },
          { labels: {}, sharedLabels: tally.labels, value: tally.sum, metricName: `${durationName}_sum` },
          { labels: {}, sharedLabels: tally.labels, value: tally.count, metricName: `${durationName}_count` },
        )
      }
      return { name: durationName, help: durationHelp, type: 'histogram', aggregator: 'sum', values }
    },
    get: async () => {
      const data = await duration.getForPromString()
      return {
        ...data,
        values: data.values.map(({ labels, sharedLabels, ...rest }) => ({
          ...rest,
          labels: { ...labels, ...sharedLabels },
        })),
      }
    },
    reset: requests.reset,
  }

  // The registry only calls get() (or getForPromString()) and reads name, type and aggregator.
  registry.registerMetric(requests as unknown as Metric)
  registry.registerMetric(duration as unknown as Metric)

  return {
    record(method, route, status, seconds) {
      let byMethod = tallies.get(route)
      if (!byMethod) {
        byMethod = new Map()
        tallies.set(route, byMethod)
      }
      let tally = byMethod.get(method)
      if (!tally) {
        tally = {
          labels: { method, route },
          buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0),
          sum: 0,
          count: 0,
          statuses: new Map(),
        }
        byMethod.set(method, tally)
      }
      // Prometheus buckets are "less than or equal to" their bound.
      let bucket = 0
      while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) {
        bucket++
      }
      tally.buckets[bucket] = (tally.buckets[bucket] ?? 0) + 1
      tally.sum += seconds
      tally.count++
      tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1)
    },
    requests,
  }
}
