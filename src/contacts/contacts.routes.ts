// /api/v1/contacts: create, upsert, get, update, delete, list.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { AppError } from '../http/errors.js'
import { apiProblems, emptyResponse, jsonResponse, ListEnvelope } from '../http/openapi-responses.js'
import { sendPage } from '../http/pagination.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { answerWithWrite, type IdempotentAnswer, sendAnswer } from '../idempotency/idempotency.js'
import { ContactInputSchema, ContactSchema, ListContactsQuery, UpsertContactSchema } from './contacts.schemas.js'
import {
  createContact,
  deleteContact,
  findContactBody,
  listContactRows,
  type StoredContact,
  updateContact,
  upsertContact,
} from './contacts.store.js'

const notFound = () => new AppError('not_found', 'No contact with this id exists in this account.')

export const contactsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.database
  const now = () => deps.clock.now().toISOString()
  /** A write's response, also what its Idempotency-Key replays. */
  const answerOf = ({ contact, body }: StoredContact, created: boolean): IdempotentAnswer => ({
    status: created ? 201 : 200,
    body,
    location: created ? `${deps.config.apiUrl}/api/v1/contacts/${contact.id}` : null,
  })

  // '' (not '/'), so the list lives at /api/v1/contacts only, without a trailing-slash twin.
  app.get(
    '',
    {
      schema: {
        operationId: 'listContacts',
        summary: 'List contacts',
        description: 'One page at a time, in creation order; pass next_cursor back as `after`.',
        querystring: ListContactsQuery,
        response: {
          200: jsonResponse(ListEnvelope('contacts', ContactSchema), 'A page of contacts.'),
          ...apiProblems('invalid_cursor'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).account.id
      return sendPage(reply, deps.secret, { list: 'contacts', accountId, filters }, { limit, after }, (position) =>
        listContactRows(db, accountId, { ...filters, ...position }),
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
            'contact_exists',
            'idempotency_key_in_use',
            'idempotency_key_reused',
            'payload_too_large',
            'unsupported_media_type',
          ),
        },
      },
    },
    async (request, reply) => {
      const keep = answerWithWrite(request)
      const stored = await createContact(
        db,
        authOf(request).account.id,
        request.body,
        now(),
        keep && ((trx, written) => keep(trx, answerOf(written, true))),
      )
      return sendAnswer(reply, answerOf(stored, true))
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
          ...apiProblems(
            'insufficient_scope',
            'idempotency_key_in_use',
            'idempotency_key_reused',
            'payload_too_large',
            'unsupported_media_type',
          ),
        },
      },
    },
    async (request, reply) => {
      const keep = answerWithWrite(request)
      const stored = await upsertContact(
        db,
        authOf(request).account.id,
        request.body,
        now(),
        keep && ((trx, written, created) => keep(trx, answerOf(written, created))),
      )
      return sendAnswer(reply, answerOf(stored, stored.created))
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
      const body = await findContactBody(db, authOf(request).account.id, request.params.id)
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
          ...apiProblems(
            'insufficient_scope',
            'not_found',
            'contact_exists',
            'payload_too_large',
            'unsupported_media_type',
          ),
        },
      },
    },
    async (request, reply) => {
      const updated = await updateContact(db, authOf(request).account.id, request.params.id, request.body, now())
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
      if (!(await deleteContact(db, authOf(request).account.id, request.params.id, now()))) {
        throw notFound()
      }
      return reply.code(204).send(null)
    },
  )
}
