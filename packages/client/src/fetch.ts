// The fetch every request goes through: an Idempotency-Key on each POST, and retries of 429, 503,
// a 409 `idempotency_key_in_use` and network errors, with exponential backoff and full jitter on top
// of Retry-After. A retried POST sends the same key, so the server does the work at most once.
// Hooks let an integrator log each attempt and retry.
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

/** An attempt about to be sent. No headers: the API key must not reach integrators' logs. */
export interface AttemptInfo {
  method: string
  url: string
  /** 1 for the first attempt, 2 for the first retry, … */
  attempt: number
}

/** A retry about to be waited for: `attempt` is the one sent after the wait. */
export interface RetryInfo extends AttemptInfo {
  /** How long the client waits before that attempt (Retry-After plus the jitter). */
  waitMs: number
  /** The status retried (429, 503, 409 `idempotency_key_in_use`); undefined after a network error. */
  status: number | undefined
  /** The `Request-Id` of the answer retried, if any. */
  requestId: string | undefined
  /** The network error retried; undefined after an answer. */
  error: Error | undefined
}

export interface RetryHooks {
  onRequest?: ((info: AttemptInfo) => void) | undefined
  onRetry?: ((info: RetryInfo) => void) | undefined
}

const RETRIED_STATUSES = new Set([429, 503])

export function retryingFetch(
  inner: FetchLike,
  options: RetryOptions,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void> = delay,
  hooks: RetryHooks = {},
): FetchLike {
  return async (input) => {
    const { method, url } = input
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
      hooks.onRequest?.({ method, url, attempt: retry + 1 })
      let response: Response
      try {
        response = await attempt()
      } catch (error) {
        if (retry >= options.maxRetries || input.signal.aborted || !isNetworkError(error)) {
          throw error
        }
        const waitMs = backoff(retry, options)
        hooks.onRetry?.({ method, url, attempt: retry + 2, waitMs, status: undefined, requestId: undefined, error })
        await sleep(waitMs, input.signal)
        continue
      }
      if (retry >= options.maxRetries || !(await isRetryable(response))) {
        return response
      }
      const waitMs = waitBeforeRetry(response, retry, options)
      if (waitMs === undefined) {
        return response // the server asks for a longer wait than maxDelayMs: the caller decides
      }
      await response.body?.cancel().catch(() => {})
      const requestId = response.headers.get('request-id') ?? undefined
      hooks.onRetry?.({ method, url, attempt: retry + 2, waitMs, status: response.status, requestId, error: undefined })
      await sleep(waitMs, input.signal)
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
function isNetworkError(error: unknown): error is TypeError {
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
