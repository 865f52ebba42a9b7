// /api/v1/contacts: create, upsert, get, update, delete, list.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { findStoredBody } from '../db/stored-body.js'
import { inTransaction, type Trx } from '../db/transaction.js'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { apiProblems, emptyResponse, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { answerWithWrite, type IdempotentAnswer, sendAnswer } from '../idempotency/idempotency.js'
import { enforceContactQuota } from './contact-count.js'
import { listContactRows, scanCost } from './contacts.list-query.js'
import { ContactInputSchema, ContactSchema, ListContactsQuery, UpsertContactSchema } from './contacts.schemas.js'
import {
  createContact,
  deleteContact,
  orContactExists,
  retryOnConflict,
  type StoredContact,
  updateContact,
  upsertContact,
} from './contacts.store.js'

/** The problems of every request with a JSON body, and of a POST that takes an Idempotency-Key. */
const BODY_PROBLEMS = ['payload_too_large', 'unsupported_media_type'] as const
const IDEMPOTENCY_PROBLEMS = ['idempotency_key_in_use', 'idempotency_key_reused'] as const

const notFound = () => new AppError('not_found', 'No contact with this id exists in this account.')

export const contactsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.database
  const maxContacts = deps.config.maxContactsPerAccount
  const now = () => deps.clock.now().toISOString()
  /**
   * A write's response, also what its Idempotency-Key replays: stored in the write's transaction,
   * so the two commit together (a crash cannot leave a write whose retry would run it again).
   */
  const answerIn = async (
    trx: Trx,
    request: FastifyRequest,
    { contact, body }: StoredContact,
    created: boolean,
  ): Promise<IdempotentAnswer> => {
    const answer = {
      status: created ? 201 : 200,
      body,
      location: created ? `${deps.config.apiUrl}/api/v1/contacts/${contact.id}` : null,
    }
    await answerWithWrite(request)?.(trx, answer)
    return answer
  }

  // '' (not '/'), so the list lives at /api/v1/contacts only, without a trailing-slash twin.
  app.get(
    '',
    {
      schema: {
        operationId: 'listContacts',
        summary: 'List contacts',
        description:
          'One page at a time, in creation order; pass next_cursor back as `after`. A page has at most `limit` contacts and may have fewer, even none, with a non-null next_cursor: with `q` or `updated_after`, a page examines at most 1,000 contacts (250 with `tag`) and ends where that scan stopped. Keep going until next_cursor is null: only that means the end. A page that examines many rows costs more than one request of the rate limit: one per 100 contacts examined (a page of a rare `q` late in a large account costs up to 10), reported in the `RateLimit` header.',
        querystring: ListContactsQuery,
        response: {
          200: jsonResponse(ListEnvelope('ContactList', 'contacts', ContactSchema), 'A page of contacts.'),
          ...apiProblems('invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).account.id
      return sendPage(
        reply,
        deps.secret,
        { list: 'contacts', accountId, filters },
        { limit, after },
        async (position) => {
          const listed = await listContactRows(db, accountId, { ...filters, ...position })
          // The request's one token was taken before; a page that examined many rows pays the rest.
          await deps.rateLimiter.chargeAccount(accountId, reply, scanCost(listed.examined) - 1)
          return listed
        },
      )
    },
  )

  app.post(
    '',
    {
      schema: {
        operationId: 'createContact',
        summary: 'Create a contact',
        description:
          '201 with the contact and its `Location`; an email already used in this account is 409 `contact_exists` with `existing_id`. With an `Idempotency-Key`, a retry replays the first response.',
        querystring: NoQuery,
        body: ContactInputSchema,
        response: {
          201: jsonResponse(ContactSchema, 'The contact, created.'),
          ...apiProblems(
            'insufficient_scope',
            'quota_exceeded',
            'contact_exists',
            ...IDEMPOTENCY_PROBLEMS,
            ...BODY_PROBLEMS,
          ),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).account.id
      const answer = await orContactExists(db, accountId, request.body.email, () =>
        inTransaction(db, async (trx) => {
          const created = await createContact(trx, accountId, request.body, now())
          await enforceContactQuota(trx, accountId, maxContacts)
          return answerIn(trx, request, created, true)
        }),
      )
      return sendAnswer(reply, answer)
    },
  )

  app.post(
    '/upsert',
    {
      schema: {
        operationId: 'upsertContact',
        summary: 'Create or update a contact by email',
        description: '201 when created, 200 when the contact with this email was updated (merge semantics).',
        querystring: NoQuery,
        body: UpsertContactSchema,
        response: {
          200: jsonResponse(ContactSchema, 'The contact with this email, updated.'),
          201: jsonResponse(ContactSchema, 'The contact, created.'),
          ...apiProblems('insufficient_scope', 'quota_exceeded', ...IDEMPOTENCY_PROBLEMS, ...BODY_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).account.id
      const at = now()
      const answer = await retryOnConflict(db, async (trx) => {
        const { created, ...stored } = await upsertContact(trx, accountId, request.body, at)
        if (created) {
          await enforceContactQuota(trx, accountId, maxContacts)
        }
        return answerIn(trx, request, stored, created)
      })
      return sendAnswer(reply, answer)
    },
  )

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getContact',
        summary: 'Get a contact',
        description: 'A contact of this account; any other id, well-formed or not, is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: { 200: jsonResponse(ContactSchema, 'The contact.'), ...apiProblems('not_found') },
      },
    },
    async (request, reply) => {
      const body = await findStoredBody(db, 'contacts', authOf(request).account.id, request.params.id)
      if (body === undefined) {
        throw notFound()
      }
      return sendAnswer(reply, { status: 200, body, location: null })
    },
  )

  app.patch(
    '/:id',
    {
      schema: {
        operationId: 'updateContact',
        summary: 'Update a contact',
        description:
          'Merge semantics: an absent field is unchanged, null clears it; custom_fields merge per key and a null value deletes the key.',
        params: IdParams,
        querystring: NoQuery,
        body: ContactInputSchema,
        response: {
          200: jsonResponse(ContactSchema, 'The contact, updated (unchanged when nothing changed).'),
          ...apiProblems('insufficient_scope', 'not_found', 'contact_exists', ...BODY_PROBLEMS),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).account.id
      const updated = await orContactExists(db, accountId, request.body.email, () =>
        inTransaction(db, (trx) => updateContact(trx, accountId, request.params.id, request.body, now())),
      )
      if (!updated) {
        throw notFound()
      }
      return sendAnswer(reply, { status: 200, body: updated.body, location: null })
    },
  )

  app.delete(
    '/:id',
    {
      schema: {
        operationId: 'deleteContact',
        summary: 'Delete a contact',
        description: 'Deletes the contact and records a `contact.deleted` event; another id is 404.',
        params: IdParams,
        querystring: NoQuery,
        response: { 204: emptyResponse('Deleted.'), ...apiProblems('insufficient_scope', 'not_found') },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).account.id
      if (!(await inTransaction(db, (trx) => deleteContact(trx, accountId, request.params.id, now())))) {
        throw notFound()
      }
      return reply.code(204).send(null)
    },
  )
}
