// The fetch every request goes through: an Idempotency-Key on each POST, and retries of 429, 503,
// a 409 `idempotency_key_in_use` and network errors, with exponential backoff and full jitter on top
// of Retry-After. A retried POST sends the same key, so the server does the work at most once.
import { retryAfterSeconds } from './errors.js'

export interface RetryOptions {
  /** Retries after the first attempt (default 8: rides out more than 10 s of 429s; 0 turns retrying off). */
  maxRetries: number
  /** The first backoff's upper bound in ms, doubled on each retry (default 500). */
  baseDelayMs: number
  /** No wait is longer than this (default 30 000): a longer `Retry-After` is not waited for, the error is thrown. */
  maxDelayMs: number
}

export const DEFAULT_RETRY: RetryOptions = { maxRetries: 8, baseDelayMs: 500, maxDelayMs: 30_000 }

export type FetchLike = (request: Request) => Promise<Response>

const RETRIED_STATUSES = new Set([429, 503])

export function retryingFetch(
  inner: FetchLike,
  options: RetryOptions,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void> = delay,
): FetchLike {
  return async (input) => {
    const headers = new Headers(input.headers)
    if (input.method === 'POST' && !headers.has('idempotency-key')) {
      headers.set('idempotency-key', globalThis.crypto.randomUUID())
    }
    // Read once, sent as-is on every attempt (a stream body can be sent only once).
    const body = input.body === null ? undefined : await input.arrayBuffer()
    const attempt = () =>
      inner(
        new Request(input.url, {
          method: input.method,
          headers,
          body,
          signal: input.signal,
          redirect: input.redirect,
          credentials: input.credentials,
        }),
      )
    for (let retry = 0; ; retry++) {
      let response: Response
      try {
        response = await attempt()
      } catch (error) {
        if (retry >= options.maxRetries || input.signal.aborted || !isNetworkError(error)) {
          throw error
        }
        await sleep(backoff(retry, options), input.signal)
        continue
      }
      if (retry >= options.maxRetries || !(await isRetryable(response))) {
        return response
      }
      const wait = waitBeforeRetry(response, retry, options)
      if (wait === undefined) {
        return response // the server asks for a longer wait than maxDelayMs: the caller decides
      }
      await response.body?.cancel().catch(() => {})
      await sleep(wait, input.signal)
    }
  }
}

async function isRetryable(response: Response): Promise<boolean> {
  if (RETRIED_STATUSES.has(response.status)) {
    return true
  }
  if (response.status !== 409) {
    return false
  }
  // The same key's first request is still being answered (after a network error, say): ask again.
  try {
    const problem = (await response.clone().json()) as { code?: unknown }
    return problem.code === 'idempotency_key_in_use'
  } catch {
    return false
  }
}

/** Full jitter over an exponential ceiling: uniform in [0, min(maxDelayMs, baseDelayMs · 2^retry)]. */
export function backoff(retry: number, options: RetryOptions, random = Math.random): number {
  return Math.round(random() * Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** retry))
}

/**
 * How long to wait before the next attempt: `Retry-After` when the server sent it plus the jittered
 * backoff on top (callers told the same second spread over a window that doubles with each retry,
 * instead of colliding again), else the backoff alone; undefined when `Retry-After` exceeds maxDelayMs.
 */
export function waitBeforeRetry(
  response: Response,
  retry: number,
  options: RetryOptions,
  random = Math.random,
): number | undefined {
  const seconds = retryAfterSeconds(response.headers.get('retry-after'))
  if (seconds === undefined) {
    return backoff(retry, options, random)
  }
  const ms = seconds * 1000
  if (ms > options.maxDelayMs) {
    return undefined
  }
  return ms + backoff(retry, options, random)
}

/** fetch rejects with a TypeError when the connection fails (refused, reset, DNS); an abort is not one. */
function isNetworkError(error: unknown): boolean {
  return error instanceof TypeError
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
