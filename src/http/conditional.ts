// Conditional requests (RFC 9110 §13): entity tags, If-Match and If-None-Match evaluated in the RFC's
// order, the 304 and the 412. What a tag is made of is each resource's business; this module only
// compares (docs/conditional-requests.md).
import crypto from 'node:crypto'
import { Type } from '@sinclair/typebox'
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, invalidParameter } from './errors.js'

// Enforced by parseCondition: Ajv never meets these headers (our validator compiler does not
// lowercase header names), so the schemas below only document them.
const CONDITION_MAX = 2048

const conditionHeader = (name: string, description: string) =>
  Type.Optional(
    Type.String({
      maxLength: CONDITION_MAX,
      description: `${description} \`*\` or a comma-separated list of entity tags as the \`ETag\` header gives them (\`"…"\`, or \`W/"…"\`). A value that is neither is 400 \`invalid_parameter\` naming ${name}.`,
    }),
  )

const IF_NONE_MATCH = conditionHeader(
  'If-None-Match',
  'Answer 304 Not Modified, without a body, when the current ETag is one of these (weak comparison); on a write, 412 instead.',
)
const IF_MATCH = conditionHeader(
  'If-Match',
  'Do it only if the current ETag is one of these (strong comparison): else 412 `precondition_failed` and nothing changes.',
)

export const ReadConditionHeaders = Type.Object({ 'If-None-Match': IF_NONE_MATCH, 'If-Match': IF_MATCH })
export const WriteConditionHeaders = Type.Object({ 'If-Match': IF_MATCH, 'If-None-Match': IF_NONE_MATCH })

/** The `config` of a write route whose handler evaluates its conditions (refuseUnevaluatedConditions). */
export const EVALUATES_CONDITIONS: FastifyContextConfig = { evaluatesConditions: true } as FastifyContextConfig

interface EntityTag {
  weak: boolean
  opaque: string
}

type Condition = '*' | EntityTag[]

export interface Preconditions {
  ifMatch: Condition | undefined
  ifNoneMatch: Condition | undefined
}

export type Outcome = 'proceed' | 'not_modified' | 'precondition_failed'

// RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text.
const ENTITY_TAG = /^(W\/)?("[\x21\x23-\x7e\x80-\xff]*")$/

/**
 * The header's condition, or undefined when absent or empty. Anything but `*` or a list of entity tags
 * is 400: an unquoted tag, the commonest mistake, would otherwise never match and fail silently.
 */
function parseCondition(name: string, value: string | string[] | undefined): Condition | undefined {
  // Node joins repeated If-Match / If-None-Match lines with ", ", as the list syntax allows.
  const text = (Array.isArray(value) ? value.join(', ') : value)?.trim()
  if (!text) {
    return undefined
  }
  if (text.length > CONDITION_MAX) {
    throw invalidParameter(name, `must be at most ${CONDITION_MAX} characters`)
  }
  if (text === '*') {
    return '*'
  }
  const tags: EntityTag[] = []
  for (const element of text.split(',')) {
    const item = element.trim()
    if (item === '') {
      continue
    }
    const match = ENTITY_TAG.exec(item)
    if (!match) {
      throw invalidParameter(
        name,
        'must be * or a list of entity tags, each in double quotes as the ETag header gives it (e.g. "0aVq…")',
      )
    }
    tags.push({ weak: match[1] !== undefined, opaque: match[2] as string })
  }
  return tags.length > 0 ? tags : undefined
}

/** The request's If-Match and If-None-Match; undefined when it has neither (the usual case, kept cheap). */
export function preconditionsOf(request: FastifyRequest): Preconditions | undefined {
  const { 'if-match': ifMatch, 'if-none-match': ifNoneMatch } = request.headers
  if (ifMatch === undefined && ifNoneMatch === undefined) {
    return undefined
  }
  const parsed = {
    ifMatch: parseCondition('If-Match', ifMatch),
    ifNoneMatch: parseCondition('If-None-Match', ifNoneMatch),
  }
  return parsed.ifMatch === undefined && parsed.ifNoneMatch === undefined ? undefined : parsed
}

const strongMatch = (tag: EntityTag, current: string) => !tag.weak && tag.opaque === current
const weakMatch = (tag: EntityTag, current: string) => tag.opaque === current

/**
 * RFC 9110 §13.2.2, for a resource that exists (a missing one is 404 whatever the headers): If-Match
 * first (strong; false → 412), then If-None-Match (weak; false → 304 on GET and HEAD, else 412).
 * `current` is undefined when the resource has no tag to give right now; no listed tag matches it.
 */
export function evaluatePreconditions(
  { ifMatch, ifNoneMatch }: Preconditions,
  current: string | undefined,
  method: string,
): Outcome {
  if (
    ifMatch !== undefined &&
    ifMatch !== '*' &&
    !ifMatch.some((tag) => current !== undefined && strongMatch(tag, current))
  ) {
    return 'precondition_failed'
  }
  if (
    ifNoneMatch !== undefined &&
    (ifNoneMatch === '*' || ifNoneMatch.some((tag) => current !== undefined && weakMatch(tag, current)))
  ) {
    return method === 'GET' || method === 'HEAD' ? 'not_modified' : 'precondition_failed'
  }
  return 'proceed'
}

export const preconditionFailed = (): AppError =>
  new AppError(
    'precondition_failed',
    'The resource has changed since the version your If-Match or If-None-Match names; nothing was done. GET it again for its current ETag, then retry the change.',
  )

/** A strong entity tag for these exact bytes: 128 bits of SHA-256, base64url, quoted. */
export function bytesTag(bytes: string | Buffer): string {
  return `"${crypto.hash('sha256', bytes, 'base64url').slice(0, 22)}"`
}

/** A keyed strong tag for a version stamp; keyed from SECRET, it never outlives its page's cursors. */
export function stampTag(key: string, parts: string): string {
  return `"${crypto.hash('sha256', `${key}\n${parts}`, 'base64url').slice(0, 22)}"`
}

/**
 * Evaluates the request's conditions against the resource's current tag: throws 412, answers 304
 * (returning the sent reply), or sets the ETag and returns undefined for the handler to go on.
 */
export function answerConditionally(
  request: FastifyRequest,
  reply: FastifyReply,
  current: string | undefined,
  preconditions = preconditionsOf(request),
): FastifyReply | undefined {
  const outcome = preconditions ? evaluatePreconditions(preconditions, current, request.method) : 'proceed'
  if (outcome === 'precondition_failed') {
    throw preconditionFailed()
  }
  if (current !== undefined) {
    reply.header('etag', current)
  }
  // RFC 9110 §15.4.5: a 304 has no body and carries the ETag (the other headers are set earlier).
  return outcome === 'not_modified' ? reply.code(304).send() : undefined
}

/**
 * On a write that evaluates no conditions, If-Match or If-None-Match is 400, not ignored: a client
 * that counts on lost-update protection learns it has none. Reads ignore them (a 200 is always a
 * correct answer to a GET). Runs after authentication and validation.
 */
export function refuseUnevaluatedConditions(scope: FastifyInstance): void {
  scope.addHook('preHandler', (request, _reply, done) => {
    const { method, headers } = request
    if (
      method === 'GET' ||
      method === 'HEAD' ||
      (headers['if-match'] === undefined && headers['if-none-match'] === undefined) ||
      // Route config `evaluatesConditions`: the contact's PATCH and DELETE.
      (request.routeOptions.config as { evaluatesConditions?: boolean }).evaluatesConditions
    ) {
      done()
      return
    }
    const name = headers['if-match'] === undefined ? 'If-None-Match' : 'If-Match'
    done(invalidParameter(name, `is not supported on ${method} ${request.routeOptions.url}: it would be ignored`))
  })
}
