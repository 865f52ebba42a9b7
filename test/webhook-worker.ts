// The delivery worker as the webhook tests run it: on the harness's database and a manual clock,
// polling often, without jitter (retry times are exact); and a wait for what it writes.
import type { manualClock } from '../src/lib/clock.js'
import { type DeliveryWorker, startDeliveryWorker } from '../src/webhooks/delivery-worker.js'
import type { TestHarness } from './harness.js'

export function startTestWorker(
  t: TestHarness,
  clock: ReturnType<typeof manualClock>,
  options: { perEndpoint?: number; concurrency?: number } = {},
): DeliveryWorker {
  const { config } = t.deps
  return startDeliveryWorker({
    db: t.db,
    clock,
    metrics: t.deps.metrics,
    log: { warn: () => {} },
    secretKey: t.deps.webhooks.secretKey,
    timeoutMs: config.webhooks.timeoutMs,
    retryScheduleS: config.webhooks.retryScheduleS,
    allowPrivateUrls: true,
    pollMs: 20,
    random: () => 0.5,
    ...options,
  })
}

/** Reads until `done` holds or `timeoutMs` passes; returns the last value read either way. */
export async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() > deadline) {
      return value
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
