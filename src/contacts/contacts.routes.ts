// /api/v1/contacts: create, upsert, get, update, delete, list.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { AppError, ProblemSchema } from '../http/errors.js'
import { PageEnvelope, sendPage } from '../http/pagination.js'
import { sendRawJson } from '../http/replies.js'
import { IdParams } from '../http/schemas.js'
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

const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, ProblemSchema]))
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
        summary: 'List contacts',
        description: 'One page at a time, in creation order; pass next_cursor back as `after`.',
        querystring: ListContactsQuery,
        response: { 200: PageEnvelope('contacts', ContactSchema), ...errors(400, 401) },
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
        summary: 'Create a contact',
        body: ContactInputSchema,
        response: { 201: ContactSchema, ...errors(400, 401, 403, 409, 413, 415) },
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
        summary: 'Create or update a contact by email',
        description: '201 when created, 200 when the contact with this email was updated (merge semantics).',
        body: UpsertContactSchema,
        response: { 200: ContactSchema, 201: ContactSchema, ...errors(400, 401, 403, 413, 415) },
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
        summary: 'Get a contact',
        params: IdParams,
        response: { 200: ContactSchema, ...errors(401, 404) },
      },
    },
    async (request, reply) => {
      const body = await findContactBody(db, authOf(request).account.id, request.params.id)
      if (body === undefined) {
        throw notFound()
      }
      return sendRawJson(reply, 200, body)
    },
  )

  app.patch(
    '/:id',
    {
      schema: {
        summary: 'Update a contact',
        description:
          'Merge semantics: an absent field is unchanged, null clears it; custom_fields merge per key and a null value deletes the key.',
        params: IdParams,
        body: ContactInputSchema,
        response: { 200: ContactSchema, ...errors(400, 401, 403, 404, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const updated = await updateContact(db, authOf(request).account.id, request.params.id, request.body, now())
      if (!updated) {
        throw notFound()
      }
      return sendRawJson(reply, 200, updated.body)
    },
  )

  app.delete(
    '/:id',
    {
      schema: {
        summary: 'Delete a contact',
        params: IdParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errors(401, 403, 404) },
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
