// POST /contacts/batch's own parts: the envelope's validation, each operation's contact checked
// as its single endpoint checks it, and the response body. The operations run through the contact
// service (contact-service.ts, applyBatch; contact-operations.ts); docs/batch.md.
import type { Static } from '@sinclair/typebox'
import type { FastifyError, FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'
import { AppError, problemOf, statusOf, toAppError } from '../http/errors.js'
import { validatorCompiler } from '../http/validation.js'
import type { ContactOperation, OperationResult } from './contact-operations.js'
import { BATCH_OPERATIONS, type BatchEnvelopeSchema, type BatchOperation } from './contacts.batch.schemas.js'
import { type ContactInput, ContactInputSchema, UpsertContactSchema } from './contacts.schemas.js'

type Envelope = Static<typeof BatchEnvelopeSchema>
type UpsertInput = ContactInput & { email: string }

/** A validator as Ajv compiles it: the verdict, and the errors of the last call. */
export interface AjvLike {
  (data: unknown): boolean
  errors?: FastifySchemaValidationError[] | null
}

// The validator the routes use, so a contact is refused with the very words its endpoint uses.
const compile = validatorCompiler() as unknown as (route: Parameters<FastifySchemaCompiler<unknown>>[0]) => AjvLike
const bodyValidator = (schema: object): AjvLike => compile({ schema, httpPart: 'body', method: 'POST', url: '' })
const contactValidators = {
  create: bodyValidator(ContactInputSchema),
  upsert: bodyValidator(UpsertContactSchema),
  update: bodyValidator(ContactInputSchema),
}

/** The members each op takes, and those it needs, read from the documented operations. */
const MEMBERS = Object.fromEntries(
  Object.entries(BATCH_OPERATIONS).map(([op, schema]) => [
    op,
    { allowed: Object.keys(schema.properties), required: [...(schema.required ?? [])] as string[] },
  ]),
) as unknown as Record<BatchOperation['op'], { allowed: string[]; required: string[] }>

/**
 * The route's body validator: the envelope's schema (checked first), then each operation's
 * members for its op, reported as Ajv reports them so the 400 reads like any other.
 */
export function batchEnvelopeValidator(validateEnvelope: AjvLike): AjvLike {
  const validate = ((data: unknown) => {
    if (!validateEnvelope(data)) {
      validate.errors = validateEnvelope.errors ?? null
      return false
    }
    const { operations } = data as Envelope
    for (const [index, operation] of operations.entries()) {
      const { allowed, required } = MEMBERS[operation.op]
      const at = `/operations/${index}`
      const extra = Object.keys(operation).find((name) => !allowed.includes(name))
      const missing = required.find((name) => !(name in operation))
      if (extra !== undefined || missing !== undefined) {
        validate.errors = [
          extra !== undefined
            ? {
                instancePath: at,
                schemaPath: '',
                keyword: 'additionalProperties',
                params: { additionalProperty: extra },
              }
            : { instancePath: at, schemaPath: '', keyword: 'required', params: { missingProperty: missing } },
        ]
        return false
      }
    }
    validate.errors = null
    return true
  }) as AjvLike
  return validate
}

/** Checks each operation's contact against its endpoint's schema (in memory, nothing read yet). */
export function checkOperations(operations: Envelope['operations']): ContactOperation[] {
  return operations.map((operation) => {
    if (operation.op === 'delete') {
      return { op: 'delete', id: operation.id as string }
    }
    const validate = contactValidators[operation.op]
    if (!validate(operation.contact)) {
      const failure = { validation: validate.errors, validationContext: 'body' } as unknown as FastifyError
      return { op: 'refused', error: toAppError(failure) as AppError }
    }
    const input = operation.contact as UpsertInput
    return operation.op === 'update' ? { op: 'update', id: operation.id as string, input } : { op: operation.op, input }
  })
}

/** `~` and `/` escaped, as in a JSON Pointer (RFC 6901). */
const pointerToken = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1')

/**
 * The problem of operation `index`, as its endpoint would send it, with each field error naming its
 * place in the batch as a JSON Pointer: `email` becomes `/operations/3/contact/email`.
 */
function itemProblem(error: AppError, index: number, requestId: string): string {
  const at = `/operations/${index}/contact`
  const errors = error.options.errors?.map(({ field, message }) => ({
    field: field === 'body' ? at : `${at}/${field.split('.').map(pointerToken).join('/')}`,
    message,
  }))
  const located = errors ? new AppError(error.code, error.message, { ...error.options, errors }) : error
  return JSON.stringify(problemOf(located, requestId))
}

/** The response body: one result per operation, in order; contacts spliced in as stored. */
export function batchResponseBody(results: readonly OperationResult[], requestId: string): string {
  const items = results.map((result, index) => {
    if ('error' in result) {
      return `{"status":${statusOf(result.error.code)},"problem":${itemProblem(result.error, index, requestId)}}`
    }
    return result.status === 204 ? '{"status":204}' : `{"status":${result.status},"contact":${result.body}}`
  })
  return `{"results":[${items.join(',')}]}`
}
