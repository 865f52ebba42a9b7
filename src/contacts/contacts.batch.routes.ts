// POST /api/v1/contacts/batch: up to 100 creates, upserts, updates and deletes in one request,
// each answered as its single endpoint would answer it (contacts.batch.ts; docs/batch.md).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { apiProblems, jsonResponse } from '../http/openapi-responses.js'
import { NoQuery } from '../http/schemas.js'
import { validatorCompiler } from '../http/validation.js'
import { answerWithWrite, type IdempotentAnswer, sendAnswer } from '../idempotency/idempotency.js'
import { type AjvLike, batchEnvelopeValidator, batchResponseBody, checkOperations } from './contacts.batch.js'
import { BATCH_MAX, BatchEnvelopeSchema, BatchRequestSchema, BatchResponseSchema } from './contacts.batch.schemas.js'

export const contactsBatchRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const compile = validatorCompiler()

  app.post(
    '/batch',
    {
      schema: {
        operationId: 'batchContacts',
        summary: 'Create, upsert, update and delete contacts in one request',
        description: `1 to ${BATCH_MAX} operations, run in order; \`results\` answers each, in the same order, with what its single endpoint would have answered: a contact (201 or 200), nothing (204) or a problem (4xx). One refused operation never fails the others. Counts as one request per operation against the rate limit; an Idempotency-Key covers the whole batch. A malformed envelope (not ${BATCH_MAX} operations or fewer, an unknown \`op\`, a member the op does not take) is a 400 with nothing done.`,
        querystring: NoQuery,
        body: BatchRequestSchema,
        response: {
          200: jsonResponse(BatchResponseSchema, 'One result per operation, in order.'),
          ...apiProblems(
            'insufficient_scope',
            'idempotency_key_in_use',
            'idempotency_key_reused',
            'payload_too_large',
            'unsupported_media_type',
          ),
        },
      },
      // The documented body (above) has each contact's schema; the route checks only the envelope,
      // so a bad contact is its own operation's 400 (checkOperations), not the whole request's.
      validatorCompiler: (route) =>
        route.httpPart === 'body'
          ? batchEnvelopeValidator(compile({ ...route, schema: BatchEnvelopeSchema }) as AjvLike)
          : compile(route),
      // One request was charged by the API key's hook: the others before anything else (the
      // Idempotency-Key's hook included), so a batch over the budget is a 429 with nothing done.
      preValidation: async (request, reply) => {
        const operations = (request.body as { operations?: unknown } | undefined)?.operations
        if (Array.isArray(operations) && operations.length > 1 && operations.length <= BATCH_MAX) {
          await deps.rateLimiter.takeAccount(authOf(request).tenant.id, reply, operations.length - 1)
        }
      },
    },
    async (request, reply) => {
      const store = answerWithWrite(request)
      let answer: IdempotentAnswer | undefined
      await deps.contacts.applyBatch(authOf(request).tenant, checkOperations(request.body.operations), {
        // Built in the transaction, so that an Idempotency-Key's answer commits with the writes.
        inTransaction: async (trx, results) => {
          answer = { status: 200, body: batchResponseBody(results, String(request.id)), location: null }
          await store?.(trx, answer)
        },
      })
      return sendAnswer(reply, answer as IdempotentAnswer)
    },
  )
}
