// The retry policy on its own: backoff bounds, Retry-After in both forms, the cap, aborts.
import { describe, expect, it } from 'vitest'
import { retryAfterSeconds } from '../src/errors.js'
import {
  type AttemptInfo,
  backoff,
  DEFAULT_RETRY,
  type RetryInfo,
  retryingFetch,
  waitBeforeRetry,
} from '../src/fetch.js'

const options = { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 5_000 }
const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers })

describe('retry policy', () => {
  it('backs off exponentially with full jitter, capped', () => {
    expect([0, 1, 2, 3].map((retry) => backoff(retry, options, () => 1))).toEqual([100, 200, 400, 800])
    expect(backoff(10, options, () => 1)).toBe(5_000)
    expect(backoff(3, options, () => 0)).toBe(0)
    // Full jitter: anywhere in the window, as the random draw says, not a fixed share of it.
    expect([0, 0.25, 0.5, 0.999].map((r) => backoff(2, options, () => r))).toEqual([0, 100, 200, 400])
    expect(DEFAULT_RETRY).toEqual({ maxRetries: 8, baseDelayMs: 500, maxDelayMs: 30_000 })
  })

  it('waits Retry-After (seconds or an HTTP date) plus the full-jitter backoff, not at all beyond maxDelayMs', () => {
    expect(waitBeforeRetry(answer(429, { 'retry-after': '2' }), 0, options, () => 0)).toBe(2_000)
    expect(waitBeforeRetry(answer(429, { 'retry-after': '2' }), 0, options, () => 1)).toBe(2_100)
    // The window on top of Retry-After doubles with each retry: callers told the same second spread out.
    expect(waitBeforeRetry(answer(429, { 'retry-after': '1' }), 3, options, () => 1)).toBe(1_800)
    expect(waitBeforeRetry(answer(429, { 'retry-after': '1' }), 3, options, () => 0.5)).toBe(1_400)
    expect(waitBeforeRetry(answer(503, { 'retry-after': '60' }), 0, options)).toBeUndefined()
    expect(waitBeforeRetry(answer(503), 1, options, () => 1)).toBe(200)
    const now = Date.parse('2026-11-24T12:00:00Z')
    expect(retryAfterSeconds('Tue, 24 Nov 2026 12:00:03 GMT', now)).toBe(3)
    expect(retryAfterSeconds('Tue, 24 Nov 2026 11:00:00 GMT', now)).toBe(0)
    expect(retryAfterSeconds('soon', now)).toBeUndefined()
    expect(retryAfterSeconds(null, now)).toBeUndefined()
  })

  it('returns a 429 whose Retry-After is longer than maxDelayMs at once, for the caller to handle', async () => {
    let calls = 0
    const fetch = retryingFetch(async () => {
      calls++
      return answer(429, { 'retry-after': '3600' })
    }, options)
    expect((await fetch(new Request('http://api.test/api/v1/me'))).status).toBe(429)
    expect(calls).toBe(1)
  })

  it('does not retry a 4xx other than 429, nor a 500, nor an aborted request', async () => {
    for (const status of [400, 404, 409, 422, 500]) {
      let calls = 0
      const fetch = retryingFetch(async () => {
        calls++
        return answer(status)
      }, options)
      await fetch(new Request('http://api.test/api/v1/me'))
      expect(calls, String(status)).toBe(1)
    }
    const controller = new AbortController()
    let calls = 0
    const fetch = retryingFetch(async () => {
      calls++
      controller.abort()
      throw new TypeError('fetch failed')
    }, options)
    await expect(fetch(new Request('http://api.test/api/v1/me', { signal: controller.signal }))).rejects.toThrow(
      TypeError,
    )
    expect(calls).toBe(1)
  })

  it('retries a 409 idempotency_key_in_use (the same key still being answered) with the same key and body', async () => {
    const seen: Array<[string | null, string]> = []
    const fetch = retryingFetch(
      async (request) => {
        seen.push([request.headers.get('idempotency-key'), await request.text()])
        return seen.length === 1
          ? new Response(JSON.stringify({ code: 'idempotency_key_in_use' }), { status: 409 })
          : answer(201)
      },
      options,
      async () => {},
    )
    const response = await fetch(new Request('http://api.test/api/v1/contacts', { method: 'POST', body: '{"a":1}' }))
    expect(response.status).toBe(201)
    expect(seen).toHaveLength(2)
    expect(seen[0]).toEqual(seen[1])
    expect(seen[0]?.[1]).toBe('{"a":1}')
  })

  it('tells the hooks of each attempt and retry: a network error, then a 503 with Retry-After', async () => {
    const attempts: AttemptInfo[] = []
    const retries: RetryInfo[] = []
    const slept: number[] = []
    const lost = new TypeError('fetch failed')
    let calls = 0
    const fetch = retryingFetch(
      async () => {
        calls++
        if (calls === 1) {
          throw lost
        }
        return calls === 2 ? answer(503, { 'retry-after': '1', 'request-id': 'req_1' }) : answer(200)
      },
      options,
      async (ms) => {
        slept.push(ms)
      },
      { onRequest: (info) => attempts.push(info), onRetry: (info) => retries.push(info) },
    )
    const url = 'http://api.test/api/v1/contacts?limit=2'
    const response = await fetch(new Request(url, { headers: { authorization: 'Bearer service_live_secret' } }))
    expect(response.status).toBe(200)
    expect(attempts).toEqual([1, 2, 3].map((attempt) => ({ method: 'GET', url, attempt })))
    expect(retries).toEqual([
      { method: 'GET', url, attempt: 2, waitMs: slept[0], status: undefined, requestId: undefined, error: lost },
      { method: 'GET', url, attempt: 3, waitMs: slept[1], status: 503, requestId: 'req_1', error: undefined },
    ])
    expect(slept[0]).toBeLessThanOrEqual(100)
    expect(slept[1]).toBeGreaterThanOrEqual(1_000)
    expect(JSON.stringify([attempts, retries])).not.toContain('service_live_secret')
  })

  it('calls no retry hook when retries are off or the Retry-After is too long to wait', async () => {
    const retries: RetryInfo[] = []
    const hooks = { onRetry: (info: RetryInfo) => retries.push(info) }
    const off = retryingFetch(
      async () => answer(429, { 'retry-after': '1' }),
      { ...options, maxRetries: 0 },
      undefined,
      hooks,
    )
    expect((await off(new Request('http://api.test/api/v1/me'))).status).toBe(429)
    const long = retryingFetch(async () => answer(429, { 'retry-after': '3600' }), options, undefined, hooks)
    expect((await long(new Request('http://api.test/api/v1/me'))).status).toBe(429)
    expect(retries).toEqual([])
  })
})
