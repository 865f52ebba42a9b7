// The bench's verdicts on the webhook scenario (bench/report.ts): a check whose reference moved
// more than its margin says INVALID instead of passing or failing.
import { describe, expect, it } from 'vitest'
import { evaluateWebhooks } from '../bench/report.js'
import type { WebhookResult } from '../bench/webhooks.js'

const run = (none: [number, number], withEndpoints: number): WebhookResult => ({
  db: 'sqlite',
  throughput: {
    deliveries: 4000,
    endpoints: 4,
    perSecond: 2500,
    wallSeconds: 1.6,
    cpuUsPerDelivery: 300,
    dbCpuUsPerDelivery: 0,
  },
  lag: {
    rate: 500,
    writes: 2500,
    deliveries: 5000,
    endpoints: 2,
    p50: 20,
    p90: 40,
    p99: 80,
    max: 90,
    writeP50: 5,
    writeP99: 9,
  },
  writes: {
    endpoints: 10,
    none: none.map((rps) => ({ rps, p50: 10, cpuUsPerRequest: 500 })),
    with: { rps: withEndpoints, p50: 10, cpuUsPerRequest: 500 },
    ratio: withEndpoints / ((none[0] + none[1]) / 2),
  },
})

const writesTarget = (result: WebhookResult) =>
  evaluateWebhooks([result]).find((target) => target.name.startsWith('POST /contacts with 10 endpoints'))

describe('the webhook write check', () => {
  it('judges against steady runs without endpoints', () => {
    expect(writesTarget(run([1000, 980], 960))).toMatchObject({ met: true })
    expect(writesTarget(run([1000, 980], 850))).toMatchObject({ met: false })
  })

  it('is INVALID when the runs without endpoints moved more than its margin', () => {
    // An outside run: 1,181, then 1,048 with endpoints, then 782 without: 106.8 % of the mean.
    const target = writesTarget(run([1181, 782], 1048))
    expect(target?.met).toBeUndefined()
    expect(target?.detail).toMatch(/^INVALID: the runs without endpoints differ by 33\.8 %/)
  })
})
