// The responses an operation documents: success bodies with their RateLimit headers, and problems
// with the headers each is sent with.
import { type TSchema, Type } from '@sinclair/typebox'
import { RETRY_AFTER_MAX_S } from '../rate-limit/rate-limit.js'
import { type ErrorCode, type FieldError, PROBLEM_SCHEMA_ID, statusOf, titleOf } from './errors.js'
import { CURSOR_MAX, PAGE_SIZE_MAX } from './pagination.js'
import { Nullable } from './schemas.js'

/** The list envelope (docs/design.md#pagination); `$id` names its component (ContactList). */
export const ListEnvelope = <T extends TSchema>($id: string, name: string, item: T) => {
  const [example] = (item as { examples?: unknown[] }).examples ?? []
  return Type.Object(
    {
      [name]: Type.Array(item, { maxItems: PAGE_SIZE_MAX }),
      next_cursor: Nullable(
        Type.String({
          maxLength: CURSOR_MAX,
          description: 'Pass as `after` for the next page; null at the end of the list.',
        }),
      ),
    },
    {
      $id,
      additionalProperties: false,
      // A page of one, with more to come: the item's own example, and a cursor's shape.
      ...(example === undefined ? {} : { examples: [{ [name]: [example], next_cursor: CURSOR_EXAMPLE }] }),
    },
  )
}

const CURSOR_EXAMPLE =
  'eyJ2IjoyLCJsIjoiY29udGFjdHMiLCJhIjoiYWNjdF8wMUpEM1o4UTRSNVM2VDdWOFc5WDBZMVoyRCIsImYiOiJ4In0.c2lnbmF0dXJlLWV4YW1wbGU'

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

/** Marks a header schema as a named component (components.headers): openapi-components.ts refers to it. */
export const HEADER_COMPONENT = 'x-header-component'
const namedHeader = <T extends TSchema>(name: string, schema: T): T => ({ ...schema, [HEADER_COMPONENT]: name })

const BUDGET_NAME: Record<Budget, string> = { account: '', failed_auth: 'FailedAuth', either: 'Spent' }

const rateLimitHeaders = (budget: Budget) => ({
  RateLimit: namedHeader(
    `RateLimit${BUDGET_NAME[budget]}`,
    Type.String({ maxLength: RATE_LIMIT_HEADER_MAX, description: BUDGET_TEXT[budget].left + ABSENT }),
  ),
  'RateLimit-Policy': namedHeader(
    `RateLimitPolicy${BUDGET_NAME[budget]}`,
    Type.String({ maxLength: RATE_LIMIT_HEADER_MAX, description: BUDGET_TEXT[budget].policy + ABSENT }),
  ),
})

const RetryAfter = namedHeader(
  'RetryAfter',
  Type.Integer({
    format: 'int32',
    minimum: 1,
    maximum: RETRY_AFTER_MAX_S,
    description: 'Seconds to wait before retrying.',
  }),
)

const WwwAuthenticate = namedHeader(
  'WWWAuthenticate',
  Type.Literal('Bearer realm="api"', { description: 'The scheme to authenticate with: a bearer API key.' }),
)

/** A JSON success response of an /api/v1 operation: every one reports the account's budget. */
export const jsonResponse = <T extends TSchema>(schema: T, description: string) => ({
  description,
  headers: rateLimitHeaders('account'),
  content: { 'application/json': { schema } },
})

export const emptyResponse = (description: string) => Type.Null({ description, headers: rateLimitHeaders('account') })

// http/conditional.ts: `"` + 22 base64url characters + `"`.
const ETag = namedHeader(
  'ETag',
  Type.String({
    pattern: '^"[A-Za-z0-9_-]{22}"$',
    maxLength: 24,
    description:
      'A strong entity tag of this representation. Send it back unchanged in `If-None-Match` to get 304 while it is unchanged, or (a contact) in `If-Match` to change or delete the contact only if nobody else has since (412 otherwise). See docs/conditional-requests.md.',
  }),
)

export const taggedJsonResponse = <T extends TSchema>(schema: T, description: string) => ({
  ...jsonResponse(schema, description),
  headers: { ...rateLimitHeaders('account'), ETag },
})

/** 304 Not Modified: no body; the ETag and the account's budget, as on the 200 it stands for. */
export const notModifiedResponse = (description: string) =>
  Type.Null({ description, headers: { ...rateLimitHeaders('account'), ETag } })

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

/** What the API says for each code: the detail (and field errors) of a typical case. */
const EXAMPLES: Record<ErrorCode, { detail: string; errors?: FieldError[]; existing_id?: string }> = {
  invalid_api_key: { detail: 'Send a valid API key in the header Authorization: Bearer <key>.' },
  invalid_signature: { detail: 'The report is not signed by a key in SECRET_SCANNING_PUBLIC_KEYS.' },
  insufficient_scope: { detail: 'This API key is read-only; POST needs a key with write access.' },
  not_found: { detail: 'No contact with this id exists in this account.' },
  method_not_allowed: { detail: 'PUT is not allowed here; use GET, HEAD, PATCH, DELETE.' },
  contact_exists: {
    detail: 'A contact with this email already exists in this account.',
    errors: [{ field: 'email', message: 'is already used by another contact' }],
    existing_id: 'con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A',
  },
  endpoint_disabled: { detail: 'The endpoint is disabled: enable it (PATCH status) to send to it.' },
  quota_exceeded: { detail: 'An account can have at most 20 webhook endpoints.' },
  idempotency_key_in_use: { detail: 'A request with this Idempotency-Key is still being processed; retry shortly.' },
  idempotency_key_reused: {
    detail: 'This Idempotency-Key was used with a different request; use a new key for a new request.',
  },
  invalid_request: { detail: 'The request body is not valid JSON.' },
  invalid_parameter: {
    detail: 'first_name must not be empty',
    errors: [{ field: 'first_name', message: 'must not be empty' }],
  },
  invalid_cursor: {
    detail: 'after is not a cursor this query issued; pass next_cursor back unchanged, with the same filters.',
    errors: [{ field: 'after', message: 'is not a valid cursor for this query' }],
  },
  payload_too_large: { detail: 'The request body is larger than 1 MiB.' },
  request_timeout: { detail: 'The request did not arrive in time; send it again.' },
  precondition_failed: {
    detail:
      'The resource has changed since the version your If-Match or If-None-Match names; nothing was done. GET it again for its current ETag, then retry the change.',
  },
  headers_too_large: { detail: 'The request headers are larger than 16 KiB.' },
  unsupported_media_type: { detail: 'Send the request body as application/json.' },
  rate_limited: {
    detail: 'This account is over its rate limit of 100 requests per second (burst 200); retry after 1 s.',
  },
  internal_error: { detail: 'Something went wrong on our side.' },
  service_unavailable: { detail: 'The service is temporarily unavailable; retry shortly.' },
}

const exampleProblem = (code: ErrorCode) => ({
  type: `/docs/errors#${code}`,
  title: titleOf(code),
  status: statusOf(code),
  code,
  request_id: 'req_01JD3Z8Q4R5S6T7V8W9X0Y1Z2B',
  ...EXAMPLES[code],
})

const ProblemRef = Type.Ref(PROBLEM_SCHEMA_ID)

/** Added to the generated description of an /api/v1 operation's problem response. */
const API_NOTES: Partial<Record<number, string>> = {
  400: ' A URL that cannot be read (bad percent-encoding, %00) is refused before authentication, without RateLimit headers.',
  401: ' The same body for a missing, malformed, unknown, revoked or expired key.',
}

/** Problem responses for these codes, by status. `rateLimited`: behind the key, so 4xx carry RateLimit. */
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
        ...(group.includes('invalid_api_key') ? { 'WWW-Authenticate': WwwAuthenticate } : {}),
      },
      content: {
        'application/problem+json': {
          schema: ProblemRef,
          examples: Object.fromEntries(
            group.map((code) => [code, { summary: titleOf(code), value: exampleProblem(code) }]),
          ),
        },
      },
    }
  }
  return responses
}

// What any /api/v1 operation can answer, whatever it does.
const CONNECTION_CODES: ErrorCode[] = ['request_timeout', 'headers_too_large']
const API_CODES: ErrorCode[] = [
  'invalid_request',
  'invalid_parameter',
  'invalid_api_key',
  ...CONNECTION_CODES,
  'rate_limited',
  'internal_error',
  'service_unavailable',
]

export const apiProblems = (...codes: ErrorCode[]) => problemResponses([...API_CODES, ...codes], true)

/** The problem responses of an operations route (the probes): no key, no rate limit. */
export const operationsProblems = (...codes: ErrorCode[]) =>
  problemResponses(['invalid_request', 'invalid_parameter', ...CONNECTION_CODES, 'internal_error', ...codes], false)
