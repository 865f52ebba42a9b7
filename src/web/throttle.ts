// Sign-in throttling: failures counted per key (an email, an IP) in a sliding window, in memory.
// (One instance; the shared Redis limiter of the production-hardening issue can replace it.)
export interface Throttle {
  /** Seconds to wait when the key has used up its failures, else 0. */
  retryAfter(key: string, now: number): number
  fail(key: string, now: number): void
  reset(key: string): void
}

export function createThrottle(maxFailures: number, windowMs: number): Throttle {
  const failures = new Map<string, number[]>()
  const recent = (key: string, now: number) => (failures.get(key) ?? []).filter((t) => now - t < windowMs)
  return {
    retryAfter(key, now) {
      const times = recent(key, now)
      failures.set(key, times)
      if (times.length < maxFailures) {
        return 0
      }
      return Math.ceil(((times[0] ?? now) + windowMs - now) / 1000)
    },
    fail(key, now) {
      const times = recent(key, now)
      times.push(now)
      failures.set(key, times)
      if (failures.size > 100_000) {
        // Bound memory under a spray of distinct keys: drop the oldest entries.
        for (const k of [...failures.keys()].slice(0, 10_000)) {
          failures.delete(k)
        }
      }
    },
    reset(key) {
      failures.delete(key)
    },
  }
}
