// The responses an operation documents, used by every route: success bodies (the list envelope
// among them) with their RateLimit headers, and problem responses (application/problem+json)
// with the headers each problem is sent with.
import { type TSchema, Type } from '@sinclair/typebox'
import { RETRY_AFTER_MAX_S } from '../rate-limit/rate-limit.js'
import { type ErrorCode, PROBLEM_SCHEMA_ID, statusOf, titleOf } from './errors.js'
import { CURSOR_MAX, PAGE_SIZE_MAX } from './pagination.js'
import { Nullable } from './schemas.js'

/** The list envelope (DESIGN §8): the page under the resource's plural name, and next_cursor. */
export const ListEnvelope = <T extends TSchema>(name: string, item: T) =>
  Type.Object({
    [name]: Type.Array(item, { maxItems: PAGE_SIZE_MAX }),
    next_cursor: Nullable(
      Type.String({
        maxLength: CURSOR_MAX,
        description: 'Pass as `after` for the next page; null at the end of the list.',
      }),
    ),
  })

/** Which budget a response's RateLimit headers report (rate-limit/rate-limit.ts). */
type Budget = 'account' | 'failed_auth' | 'either'

const BUDGET_TEXT: Record<Budget, { policy: string; left: string }> = {
  account: {
    policy: 'The account\'s token bucket: `"account";q=<burst>;w=<seconds to refill it>`.',
    left: 'The account\'s budget after this request: `"account";r=<requests left>;t=<seconds until full>`.',
  },
  failed_auth: {
    policy: 'Failed authentications allowed per client IP: `"failed_auth";q=<per minute>;w=60`.',
    left: 'The client IP\'s failed-authentication budget: `"failed_auth";r=<failures left>;t=<seconds until full>`.',
  },
  either: {
    policy:
      'The budget this request spent: `"account";q=…;w=…`, or for a failed authentication `"failed_auth";q=…;w=60`.',
    left: 'The budget this request spent, now empty: `"account";r=0;t=<seconds>` or `"failed_auth";r=0;t=<seconds>`.',
  },
}

// Structured fields with a name and two numbers up to RATE_LIMIT_MAX: well under 64 characters.
const RATE_LIMIT_HEADER_MAX = 64
const ABSENT = ' Absent when rate limiting is off or its shared store is unreachable.'

const rateLimitHeaders = (budget: Budget) => ({
  RateLimit: Type.String({ maxLength: RATE_LIMIT_HEADER_MAX, description: BUDGET_TEXT[budget].left + ABSENT }),
  'RateLimit-Policy': Type.String({
    maxLength: RATE_LIMIT_HEADER_MAX,
    description: BUDGET_TEXT[budget].policy + ABSENT,
  }),
})

const RetryAfter = Type.Integer({
  format: 'int32',
  minimum: 1,
  maximum: RETRY_AFTER_MAX_S,
  description: 'Seconds to wait before retrying.',
})

/** A JSON success response of an /api/v1 operation: every one reports the account's budget. */
export const jsonResponse = <T extends TSchema>(schema: T, description: string) => ({
  description,
  headers: rateLimitHeaders('account'),
  content: { 'application/json': { schema } },
})

/** A success response without a body (204) of an /api/v1 operation. */
export const emptyResponse = (description: string) => Type.Null({ description, headers: rateLimitHeaders('account') })

/** The budget whose RateLimit headers a problem with this code is sent with (none for 5xx). */
const budgetOf = (code: ErrorCode): Budget | undefined => {
  switch (code) {
    case 'invalid_api_key':
      return 'failed_auth'
    case 'rate_limited':
      return 'either'
    case 'internal_error':
    case 'service_unavailable':
      return undefined
    default:
      return 'account'
  }
}
const RETRIED: ReadonlySet<ErrorCode> = new Set(['rate_limited', 'idempotency_key_in_use', 'service_unavailable'])

// The shared schema installErrorHandlers registers (errors.ts).
const ProblemRef = Type.Ref(PROBLEM_SCHEMA_ID)

/** Added to the generated description of an /api/v1 operation's problem response. */
const API_NOTES: Partial<Record<number, string>> = {
  400: ' A URL that cannot be read (bad percent-encoding, %00) is refused before authentication, without RateLimit headers.',
  401: ' The same body for a missing, malformed, unknown, revoked or expired key.',
}

/**
 * Problem responses for these codes, grouped by status, documented as application/problem+json
 * with one shape (ProblemSchema) and the headers each is sent with. `rateLimited`: the route is
 * behind the API key, so its 4xx carry RateLimit headers.
 */
function problemResponses(codes: readonly ErrorCode[], rateLimited: boolean) {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of new Set(codes)) {
    byStatus.set(statusOf(code), [...(byStatus.get(statusOf(code)) ?? []), code])
  }
  const responses: Record<number, object> = {}
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const budgets = new Set(group.map(budgetOf).filter((b) => b !== undefined))
    const budget: Budget | undefined = budgets.size > 1 ? 'either' : [...budgets][0]
    responses[status] = {
      description: `${group.map((code) => `${titleOf(code)} (\`${code}\`)`).join(', ')}.${(rateLimited && API_NOTES[status]) || ''}`,
      headers: {
        ...(rateLimited && budget ? rateLimitHeaders(budget) : {}),
        ...(group.some((code) => RETRIED.has(code)) ? { 'Retry-After': RetryAfter } : {}),
        ...(group.includes('invalid_api_key') ? { 'WWW-Authenticate': Type.Literal('Bearer realm="api"') } : {}),
      },
      content: { 'application/problem+json': { schema: ProblemRef } },
    }
  }
  return responses
}

// What any /api/v1 operation can answer, whatever it does: a URL it cannot read, %00 or an unknown
// query parameter (400), a key that is not valid (401), a spent budget (429), a failure of ours
// (500) or of the database (503).
const API_CODES: ErrorCode[] = [
  'invalid_request',
  'invalid_parameter',
  'invalid_api_key',
  'rate_limited',
  'internal_error',
  'service_unavailable',
]

/** The problem responses of an /api/v1 operation: those every operation has, and `codes`. */
export const apiProblems = (...codes: ErrorCode[]) => problemResponses([...API_CODES, ...codes], true)

/** The problem responses of an operations route (the probes): no key, no rate limit. */
export const operationsProblems = (...codes: ErrorCode[]) =>
  problemResponses(['invalid_request', 'invalid_parameter', 'internal_error', ...codes], false)
