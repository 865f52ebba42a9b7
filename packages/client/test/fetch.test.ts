// The retry policy on its own: backoff bounds, Retry-After in both forms, the cap, aborts.
import { describe, expect, it } from 'vitest'
import { retryAfterSeconds } from '../src/errors.js'
import { backoff, DEFAULT_RETRY, retryingFetch, waitBeforeRetry } from '../src/fetch.js'

const options = { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 5_000 }
const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers })

describe('retry policy', () => {
  it('backs off exponentially with full jitter, capped', () => {
    expect([0, 1, 2, 3].map((retry) => backoff(retry, options, () => 1))).toEqual([100, 200, 400, 800])
    expect(backoff(10, options, () => 1)).toBe(5_000)
    expect(backoff(3, options, () => 0)).toBe(0)
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
})
