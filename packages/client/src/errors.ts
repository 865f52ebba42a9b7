// ApiError: an error response of the API (an RFC 9457 problem body) as a typed exception.

/** One field's complaint in a 400 `invalid_parameter` problem. */
export interface FieldError {
  field: string
  message: string
}

/** The RFC 9457 problem body the API answers errors with (`application/problem+json`). */
export interface Problem {
  type?: string
  title?: string
  status?: number
  detail?: string
  code?: string
  request_id?: string
  errors?: FieldError[]
  [extension: string]: unknown
}

/**
 * An error answer of the API (any non-2xx status once retries are spent). `code` is the stable,
 * machine-readable reason (`invalid_parameter`, `not_found`, `contact_exists`, `rate_limited`, …);
 * branch on it, not on `message`.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError'
  /** The HTTP status code. */
  readonly status: number
  /** The problem's `code`, or `http_<status>` when the body was not a problem (a proxy's page). */
  readonly code: string
  /** The `Request-Id` of the failed request (quote it to support), from the body or the header. */
  readonly requestId: string | undefined
  /** The problem's `detail`: what was wrong with this request. */
  readonly detail: string | undefined
  /** The problem's `title`. */
  readonly title: string | undefined
  /** Per-field complaints of a 400 `invalid_parameter`; empty otherwise. */
  readonly fieldErrors: FieldError[]
  /** Seconds the server asked to wait (`Retry-After`, on 429 and 503), if it said. */
  readonly retryAfter: number | undefined
  /** The whole problem body (extensions such as `existing_id` on `contact_exists` included). */
  readonly problem: Problem
  /** The response headers. */
  readonly headers: Headers

  constructor(status: number, problem: Problem, headers: Headers) {
    const code = typeof problem.code === 'string' ? problem.code : `http_${status}`
    const detail = typeof problem.detail === 'string' ? problem.detail : undefined
    const title = typeof problem.title === 'string' ? problem.title : undefined
    super(`${status} ${code}${detail ? `: ${detail}` : title ? `: ${title}` : ''}`)
    this.status = status
    this.code = code
    this.detail = detail
    this.title = title
    this.requestId =
      (typeof problem.request_id === 'string' ? problem.request_id : undefined) ??
      headers.get('request-id') ??
      undefined
    this.fieldErrors = Array.isArray(problem.errors)
      ? problem.errors.filter(
          (entry): entry is FieldError =>
            typeof entry === 'object' &&
            entry !== null &&
            typeof entry.field === 'string' &&
            typeof entry.message === 'string',
        )
      : []
    this.retryAfter = retryAfterSeconds(headers.get('retry-after'))
    this.problem = problem
    this.headers = headers
  }

  /** From a failed response and its body as openapi-fetch read it (parsed JSON, or text). */
  static from(response: Response, body: unknown): ApiError {
    const problem: Problem =
      typeof body === 'object' && body !== null && !Array.isArray(body)
        ? (body as Problem)
        : { detail: typeof body === 'string' && body.length > 0 ? body.slice(0, 500) : undefined }
    return new ApiError(response.status, problem, response.headers)
  }
}

/** `Retry-After` in seconds: delay-seconds or an HTTP date (RFC 9110 §10.2.3); undefined if absent or unreadable. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (value === null) {
    return undefined
  }
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) {
    return Number(trimmed)
  }
  const date = Date.parse(trimmed)
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000))
}
