// The closed set of API error codes, the one status table, and the mapping of every failure
// (ours, Fastify's, the database's) to an RFC 9457 problem response.

import type { Duplex } from 'node:stream'
import { type Static, Type } from '@sinclair/typebox'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { idLength, idPattern, newId } from '../lib/ids.js'
import { fieldErrorsOf } from './validation-errors.js'

const CATALOGUE = {
  invalid_api_key: { status: 401, title: 'Invalid API key' },
  invalid_signature: { status: 401, title: 'Invalid signature' },
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

// A problem echoes what the client sent (a field's name, the URL): clipped, so a huge field name does
// not come back whole and the document's maxLength holds.
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
  problemCodes.set(reply, error.code)
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

/** The code of the problem each reply sent, for the request log. */
const problemCodes = new WeakMap<FastifyReply, ErrorCode>()

/** The `code` of the problem this reply sent; undefined when it sent none. */
export const problemCodeOf = (reply: FastifyReply): ErrorCode | undefined => problemCodes.get(reply)

function fromValidation(error: FastifyError): AppError {
  const errors = fieldErrorsOf(error)
  const first = errors[0] ?? { field: 'request', message: 'is invalid' }
  if (error.validationContext === 'querystring' && first.field === 'after') {
    // Too long to be a cursor: a bad cursor like any other.
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
 * A problem, not Fastify's `{"error": …}`, for a request Node's HTTP parser refused (malformed, headers
 * too large, too slow). The connection closes: its bytes cannot be trusted to frame another request.
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
