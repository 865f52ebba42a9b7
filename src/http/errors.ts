// The closed set of API error codes, the one status table, and the mapping of every failure
// (ours, Fastify's, the database's) to an RFC 9457 problem response.

import type { Duplex } from 'node:stream'
import { type Static, Type } from '@sinclair/typebox'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { idLength, idPattern, newId } from '../lib/ids.js'

const CATALOGUE = {
  invalid_api_key: { status: 401, title: 'Invalid API key' },
  insufficient_scope: { status: 403, title: 'Insufficient scope' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  contact_exists: { status: 409, title: 'Contact exists' },
  endpoint_disabled: { status: 409, title: 'Endpoint disabled' },
  quota_exceeded: { status: 403, title: 'Quota exceeded' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency key in use' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  invalid_request: { status: 400, title: 'Invalid request' },
  invalid_parameter: { status: 400, title: 'Invalid parameter' },
  invalid_cursor: { status: 400, title: 'Invalid cursor' },
  request_timeout: { status: 408, title: 'Request timeout' },
  precondition_failed: { status: 412, title: 'Precondition failed' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  headers_too_large: { status: 431, title: 'Request headers too large' },
  rate_limited: { status: 429, title: 'Rate limited' },
  internal_error: { status: 500, title: 'Internal error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>

export type ErrorCode = keyof typeof CATALOGUE
export const ERROR_CODES = Object.keys(CATALOGUE) as ErrorCode[]
export const statusOf = (code: ErrorCode): number => CATALOGUE[code].status
export const titleOf = (code: ErrorCode): string => CATALOGUE[code].title

export interface FieldError {
  field: string
  message: string
}

/** A failure the client can act on. Thrown by any layer; turned into a problem response here. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      errors?: FieldError[]
      headers?: Record<string, string>
      /** Extra members of the problem body (RFC 9457 extensions), e.g. existing_id. */
      extensions?: Record<string, string>
    } = {},
  ) {
    super(message)
  }
}

export const invalidParameter = (field: string, message: string): AppError =>
  new AppError('invalid_parameter', `${field} ${message}`, { errors: [{ field, message }] })

// A problem echoes what the client sent (an unknown field's name, the URL): detail and each field
// error are clipped, so a 1 MiB body key does not come back as a 1 MiB problem and the
// document's maxLength holds. Ajv stops at the first error, the contact rules report a few.
const PROBLEM_DETAIL_MAX = 1024
const FIELD_ERROR_TEXT_MAX = 256
const FIELD_ERRORS_MAX = 20

const longest = (texts: string[]): number => Math.max(...texts.map((text) => text.length))
const TYPE_PREFIX = '/docs/errors#'

export const PROBLEM_SCHEMA_ID = 'Problem'
export const ProblemSchema = Type.Object(
  {
    type: Type.String({
      maxLength: TYPE_PREFIX.length + longest(ERROR_CODES),
      examples: [`${TYPE_PREFIX}invalid_parameter`],
    }),
    title: Type.String({ maxLength: longest(ERROR_CODES.map(titleOf)) }),
    status: Type.Integer({ format: 'int32', minimum: 400, maximum: 599 }),
    detail: Type.String({ maxLength: PROBLEM_DETAIL_MAX }),
    code: Type.Union(ERROR_CODES.map((c) => Type.Literal(c))),
    request_id: Type.String({ pattern: idPattern('request'), maxLength: idLength('request') }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          field: Type.String({ maxLength: FIELD_ERROR_TEXT_MAX }),
          message: Type.String({ maxLength: FIELD_ERROR_TEXT_MAX }),
        }),
        { maxItems: FIELD_ERRORS_MAX },
      ),
    ),
    existing_id: Type.Optional(
      Type.String({
        pattern: idPattern('contact'),
        maxLength: idLength('contact'),
        description: 'contact_exists: the id of the contact that has this email.',
      }),
    ),
  },
  { $id: PROBLEM_SCHEMA_ID, description: 'RFC 9457 problem details' },
)
export type Problem = Static<typeof ProblemSchema>

const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

function problemBody(code: ErrorCode, detail: string, requestId: string, extra: object = {}): Problem {
  return {
    type: `${TYPE_PREFIX}${code}`,
    title: titleOf(code),
    status: statusOf(code),
    detail: clip(detail, PROBLEM_DETAIL_MAX),
    code,
    request_id: requestId,
    ...extra,
  }
}

/** The problem body of an error, as a response (or a batch item's result) carries it. */
export function problemOf(error: AppError, requestId: string): Problem {
  const { errors, extensions } = error.options
  return problemBody(error.code, error.message, requestId, {
    ...(errors
      ? {
          errors: errors.slice(0, FIELD_ERRORS_MAX).map(({ field, message }) => ({
            field: clip(field, FIELD_ERROR_TEXT_MAX),
            message: clip(message, FIELD_ERROR_TEXT_MAX),
          })),
        }
      : {}),
    ...extensions,
  })
}

export function sendProblem(reply: FastifyReply, error: AppError): FastifyReply {
  const { headers } = error.options
  const body = problemOf(error, String(reply.request.id))
  if (headers) {
    reply.headers(headers)
  }
  // A problem is no representation of the resource: an ETag set before the failure must not be sent.
  reply.removeHeader('etag')
  // Serialized here so a route's response schema can never strip the problem's members.
  return reply
    .code(body.status)
    .type('application/problem+json; charset=utf-8')
    .serializer((payload) => JSON.stringify(payload))
    .send(body)
}

const READ_ONLY_FIELDS = new Set(['id', 'object', 'account_id', 'created_at', 'updated_at'])

/** One of Ajv's errors, with the schema it failed (Ajv runs with verbose: true, http/validation.ts). */
interface Issue {
  instancePath: string
  keyword: string
  params: Record<string, unknown>
  message?: string
  parentSchema?: { type?: unknown; minimum?: number; maximum?: number; format?: unknown }
}

/** What a field error says, and how it merges with the others Ajv reports for the same field. */
type Finding = { field: string } & (
  | { kind: 'rule'; message: string }
  | { kind: 'type'; types: string[] }
  | { kind: 'choice'; values: string[] }
)

const UNIONS = new Set(['anyOf', 'oneOf'])

/**
 * Whether an error only echoes a union's other branches. A value that fails Nullable(X) fails X and
 * "must be null", then "must match a schema in anyOf": the union's own error says nothing, and a
 * branch's wrong type says nothing when another branch took the value and failed inside it (deeper)
 * or on a rule of its own (same place).
 */
function isUnionNoise(issue: Issue, issues: readonly Issue[]): boolean {
  if (UNIONS.has(issue.keyword)) {
    return issues.some((other) => !UNIONS.has(other.keyword))
  }
  if (issue.keyword !== 'type') {
    return false
  }
  return issues.some(
    (other) =>
      !UNIONS.has(other.keyword) &&
      (other.instancePath.startsWith(`${issue.instancePath}/`) ||
        (other.instancePath === issue.instancePath && other.keyword !== 'type')),
  )
}

const FORMAT_TEXT: Record<string, string> = {
  'date-time': 'an RFC 3339 date-time, e.g. 2026-01-31T09:00:00Z',
  email: 'an email address',
  uri: 'an absolute URL',
}

const plural = (count: unknown, one: string) => `${count} ${one}${count === 1 ? '' : 's'}`

function findingOf(issue: Issue, error: FastifyError): Finding {
  const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.')
  const { params } = issue
  const at = path || error.validationContext || 'body'
  const rule = (message: string): Finding => ({ field: at, kind: 'rule', message })
  switch (issue.keyword) {
    case 'additionalProperties': {
      const name = String(params.additionalProperty)
      const field = path ? `${path}.${name}` : name
      if (path === 'custom_fields') {
        return {
          field,
          kind: 'rule',
          message: 'is not a valid custom field key: use 1-40 letters, digits or underscores',
        }
      }
      return {
        field,
        kind: 'rule',
        message: READ_ONLY_FIELDS.has(name) && !path ? 'is read-only' : 'is not a known field',
      }
    }
    case 'required': {
      const name = String(params.missingProperty)
      return { field: path ? `${path}.${name}` : name, kind: 'rule', message: 'is required' }
    }
    case 'enum':
      return { field: at, kind: 'choice', values: (params.allowedValues as unknown[]).map(String) }
    case 'const':
      return { field: at, kind: 'choice', values: [String(params.allowedValue)] }
  }
  const schema = issue.parentSchema
  if (schema?.type === 'integer' && schema.minimum !== undefined && schema.maximum !== undefined) {
    return rule(`must be an integer from ${schema.minimum} to ${schema.maximum}`)
  }
  switch (issue.keyword) {
    case 'type':
      return { field: at, kind: 'type', types: String(params.type).split(',') }
    case 'minLength':
      return rule(params.limit === 1 ? 'must not be empty' : `must be at least ${plural(params.limit, 'character')}`)
    case 'maxLength':
      return rule(`must be at most ${plural(params.limit, 'character')}`)
    case 'minItems':
      return rule(`must have at least ${plural(params.limit, 'item')}`)
    case 'maxItems':
      return rule(`must have at most ${plural(params.limit, 'item')}`)
    case 'maxProperties':
      return rule(`must have at most ${plural(params.limit, 'key')}`)
    case 'uniqueItems':
      return rule('must not repeat an item')
    case 'format': {
      const format = String(params.format)
      return rule(`must be ${FORMAT_TEXT[format] ?? `in the format ${format}`}`)
    }
    case 'pattern':
      if (params.pattern === '\\S') {
        return rule('must not be blank')
      }
  }
  return rule(issue.message ?? 'is invalid')
}

const TYPE_TEXT: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
}

/** "a, b or c" */
const oneOf = (items: string[]): string =>
  items.length > 1 ? `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}` : (items[0] ?? '')

/** One error per field: a rule it broke if any, else the values or types it may take, merged. */
function perField(findings: Finding[]): FieldError[] {
  const fields = new Map<string, Finding[]>()
  for (const finding of findings) {
    fields.set(finding.field, [...(fields.get(finding.field) ?? []), finding])
  }
  return [...fields].map(([field, all]) => {
    const rule = all.find((finding) => finding.kind === 'rule')
    if (rule) {
      return { field, message: rule.message }
    }
    const values = [...new Set(all.flatMap((finding) => (finding.kind === 'choice' ? finding.values : [])))]
    if (values.length > 0) {
      return { field, message: values.length === 1 ? `must be ${values[0]}` : `must be one of ${values.join(', ')}` }
    }
    const types = [...new Set(all.flatMap((finding) => (finding.kind === 'type' ? finding.types : [])))]
    return { field, message: `must be ${oneOf(types.map((type) => TYPE_TEXT[type] ?? type))}` }
  })
}

/** Translates Ajv's errors into one error per field, each a line a client can act on. */
function fromValidation(error: FastifyError): AppError {
  const issues = (error.validation ?? []) as Issue[]
  const errors = perField(issues.filter((issue) => !isUnionNoise(issue, issues)).map((i) => findingOf(i, error)))
  const first = errors[0] ?? { field: 'request', message: 'is invalid' }
  if (error.validationContext === 'querystring' && first.field === 'after') {
    // Too long to be a cursor: a bad cursor like any other (DESIGN §8).
    return new AppError('invalid_cursor', 'after is not a cursor this query issued; pass next_cursor back unchanged.', {
      errors: [{ field: 'after', message: 'is not a valid cursor for this query' }],
    })
  }
  return new AppError('invalid_parameter', `${first.field} ${first.message}`, { errors })
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01', // admin_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  'SQLITE_BUSY',
])

/** Maps any error to the AppError a client sees; returns undefined for a real internal error. */
export function toAppError(error: FastifyError | Error): AppError | undefined {
  if (error instanceof AppError) {
    return error
  }
  const fastifyError = error as FastifyError
  if (fastifyError.validation) {
    return fromValidation(fastifyError)
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', 'The request body is larger than 1 MiB.')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'Send the request body as application/json.')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_request', 'The request body is empty; send a JSON object.')
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('invalid_request', 'The request body is not valid JSON.')
  }
  const dbCode = String((error as { code?: unknown }).code ?? '')
  if (UNAVAILABLE_CODES.has(dbCode) || /timeout exceeded when trying to connect/i.test(error.message)) {
    return new AppError('service_unavailable', 'The service is temporarily unavailable; retry shortly.', {
      headers: { 'retry-after': '1' },
    })
  }
  const status = fastifyError.statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413) {
      return new AppError('payload_too_large', 'The request is too large.')
    }
    if (status === 415) {
      return new AppError('unsupported_media_type', 'Send the request body as application/json.')
    }
    // Fastify's own 4xx messages are safe (no internals) and specific, e.g. a bad URL encoding.
    return new AppError(
      'invalid_request',
      error instanceof SyntaxError ? 'The request body is not valid JSON.' : error.message,
    )
  }
  return undefined
}

/**
 * What a connection gets when Node's HTTP parser refuses its request before Fastify sees it (a
 * malformed request, headers over 16 KiB, a request slower than REQUEST_TIMEOUT_MS): a problem like
 * any other, with its own request id, instead of Fastify's `{"error": …}`. The connection closes:
 * after a parse error its bytes cannot be trusted to frame another request.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy()
    return
  }
  const [code, detail]: [ErrorCode, string] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['request_timeout', 'The request did not arrive in time; send it again.']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? ['headers_too_large', 'The request headers are larger than 16 KiB.']
        : ['invalid_request', 'The request is not valid HTTP/1.1 (its framing or headers could not be read).']
  const requestId = newId('request')
  const body = JSON.stringify(problemBody(code, detail, requestId))
  // Written, then closed at once whatever the client still sends (as Fastify's own handler does).
  socket.write(
    `HTTP/1.1 ${statusOf(code)} ${titleOf(code)}\r\n` +
      'Content-Type: application/problem+json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `Request-Id: ${requestId}\r\n` +
      'Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n' +
      body,
  )
  socket.destroy()
}

export function installErrorHandlers(app: FastifyInstance): void {
  // Shared, so every route's problem responses refer to one schema (one `Problem` component in
  // the OpenAPI document); registered before the routes, which reference it by its $id.
  app.addSchema(ProblemSchema)
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const appError = toAppError(error)
    if (appError) {
      if (appError.code === 'service_unavailable') {
        request.log.warn({ err: error }, 'database unavailable')
      }
      return sendProblem(reply, appError)
    }
    // Unknown: log everything, tell the client nothing about internals.
    request.log.error({ err: error }, 'unhandled error')
    return sendProblem(reply, new AppError('internal_error', 'Something went wrong on our side.'))
  })
}
