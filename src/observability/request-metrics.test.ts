import { Counter, Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { createRequestMetrics, DURATION_BUCKETS } from './request-metrics.js'

// The same responses recorded by the tallies and by prom-client's own Counter and Histogram, as
// createMetrics declared them before: the scrape must be the same text, byte for byte.
describe('request metrics', () => {
  const responses: Array<[string, string, number, number]> = [
    ['GET', '/api/v1/me', 200, 0.0004],
    ['GET', '/api/v1/me', 200, 0.005], // on a bound: counted in le="0.005"
    ['GET', '/api/v1/me', 429, 0.0051],
    ['GET', '/api/v1/contacts', 200, 0.0123],
    ['POST', '/api/v1/contacts', 201, 0.3],
    ['POST', '/api/v1/contacts', 409, 2.5],
    ['GET', 'unmatched', 404, 7],
    ['GET', '/api/v1/contacts', 200, 0.001],
  ]

  const reference = () => {
    const registry = new Registry()
    const counter = new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    })
    const histogram = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    })
    for (const [method, route, status, seconds] of responses) {
      counter.inc({ method, route, status: String(status) })
      histogram.observe({ method, route }, seconds)
    }
    return { registry, counter }
  }

  it("scrapes as the same text as prom-client's Counter and Histogram", async () => {
    const registry = new Registry()
    const metrics = createRequestMetrics(registry)
    for (const response of responses) {
      metrics.record(...response)
    }
    const expected = await reference().registry.metrics()
    expect(await registry.metrics()).toBe(expected)
    expect(expected).toContain('http_request_duration_seconds_bucket{le="0.005",method="GET",route="/api/v1/me"} 2')
  })

  it("gives the counter's values as prom-client's Counter.get() does", async () => {
    const metrics = createRequestMetrics(new Registry())
    for (const response of responses) {
      metrics.record(...response)
    }
    const ours = (await metrics.requests.get()).values
    const theirs = (await reference().counter.get()).values
    const sorted = (values: Array<{ labels: object; value: number }>) =>
      values.map((v) => JSON.stringify([v.labels, v.value])).sort()
    expect(sorted(ours)).toEqual(sorted(theirs))
  })
})
