// /api/v1/contacts: create, upsert, get, update, delete, list.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import * as migrations from '../db/migrations/index.js'
import { findStoredBody } from '../db/stored-body.js'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import {
  answerConditionally,
  bytesTag,
  EVALUATES_CONDITIONS,
  evaluatePreconditions,
  preconditionFailed,
  preconditionsOf,
  ReadConditionHeaders,
  stampTag,
  WriteConditionHeaders,
} from '../http/conditional.js'
import { AppError } from '../http/errors.js'
import {
  apiProblems,
  emptyResponse,
  ListEnvelope,
  notModifiedResponse,
  taggedJsonResponse,
} from '../http/openapi-responses.js'
import { buildPage, sendPageBody } from '../http/pagination.js'
import { IdParams, NoQuery } from '../http/schemas.js'
import { answerWithWrite, type IdempotentAnswer, sendAnswer } from '../idempotency/idempotency.js'
import { deriveKey } from '../lib/crypto.js'
import type { ContactPrecondition, InTransaction } from './contact-service.js'
import { listContactRows, scanCost } from './contacts.list-query.js'
import { contactsVersion } from './contacts.list-version.js'
import { ContactInputSchema, ContactSchema, ListContactsQuery, UpsertContactSchema } from './contacts.schemas.js'
import type { StoredContact } from './contacts.store.js'

/** The problems of every request with a JSON body, and of a POST that takes an Idempotency-Key. */
const BODY_PROBLEMS = ['payload_too_large', 'unsupported_media_type'] as const
const IDEMPOTENCY_PROBLEMS = ['idempotency_key_in_use', 'idempotency_key_reused'] as const

const notFound = () => new AppError('not_found', 'No contact with this id exists in this account.')

/**
 * What a list page's ETag is keyed with besides SECRET (whose cursors the page carries): the
 * page's format and the newest migration, since a migration may rewrite stored bodies without an
 * event. Bump the format when the envelope's bytes change for the same rows.
 */
const LIST_TAG_FORMAT = `contacts-page/1 ${Object.keys(migrations).at(-1)}`

/** The query as a list page's ETag covers it: every parameter, in one spelling whatever the URL's order. */
const canonicalQuery = (query: Record<string, unknown>): string =>
  JSON.stringify(
    Object.keys(query)
      .sort()
      .map((key) => [key, query[key]]),
  )

/**
 * The write's If-Match / If-None-Match as a check of the contact locked in its transaction (412 when
 * it fails); undefined without them. Its tag is that of the exact bytes a GET would send.
 */
function contactPrecondition(request: FastifyRequest): ContactPrecondition | undefined {
  const preconditions = preconditionsOf(request)
  return (
    preconditions &&
    ((currentBody) => {
      if (evaluatePreconditions(preconditions, bytesTag(currentBody), request.method) !== 'proceed') {
        throw preconditionFailed()
      }
    })
  )
}

/**
 * On the routes that answer with a contact: its ETag, the tag of the exact bytes sent. An onSend
 * hook, so an Idempotency-Key's replay (sent before the handler) carries the tag of the body it
 * replays too.
 */
const tagContact = (
  _request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (err: null, value: unknown) => void,
) => {
  if (
    (reply.statusCode === 200 || reply.statusCode === 201) &&
    typeof payload === 'string' &&
    !reply.hasHeader('etag')
  ) {
    reply.header('etag', bytesTag(payload))
  }
  done(null, payload)
}

export const contactsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.database
  const listTagKey = `${deriveKey(deps.secret, 'list-etag').toString('base64url')} ${LIST_TAG_FORMAT}`
  /**
   * A write's response, which its Idempotency-Key replays: stored in the write's transaction, so the
   * two commit together (a crash cannot leave a write whose retry would run it again).
   */
  const answerOf = ({ contact, body }: StoredContact, created: boolean): IdempotentAnswer => ({
    status: created ? 201 : 200,
    body,
    location: created ? `${deps.config.apiUrl}/api/v1/contacts/${contact.id}` : null,
  })
  const storedWith = (
    request: FastifyRequest,
    created?: boolean,
  ): InTransaction<StoredContact & { created?: boolean }> | undefined => {
    const store = answerWithWrite(request)
    return store && ((trx, stored) => store(trx, answerOf(stored, created ?? stored.created === true)))
  }

  // '' (not '/'), so the list lives at /api/v1/contacts only, without a trailing-slash twin.
  app.get(
    '',
    {
      schema: {
        operationId: 'listContacts',
        summary: 'List contacts',
        description:
          'One page at a time, in creation order; pass next_cursor back as `after`. A page has at most `limit` contacts and may have fewer, even none, with a non-null next_cursor: with `q` or `updated_after`, a page examines at most 1,000 contacts (250 with `tag`) and ends where that scan stopped. Keep going until next_cursor is null: only that means the end. A page that examines many rows costs more than one request of the rate limit: one per 100 contacts examined (a page of a rare `q` late in a large account costs up to 10), reported in the `RateLimit` header. A page has an `ETag`: poll with `If-None-Match` and get 304, without reading a contact, until a contact of the account changes.',
        querystring: ListContactsQuery,
        headers: ReadConditionHeaders,
        response: {
          200: taggedJsonResponse(ListEnvelope('ContactList', 'contacts', ContactSchema), 'A page of contacts.'),
          304: notModifiedResponse(
            'Not modified: the page is still the one with this ETag (no contact of the account changed since).',
          ),
          ...apiProblems('invalid_cursor', 'precondition_failed'),
        },
      },
    },
    async (request, reply) => {
      const { limit, after, ...filters } = request.query
      const accountId = authOf(request).tenant.id
      const page = () =>
        buildPage(deps.secret, { list: 'contacts', accountId, filters }, { limit, after }, async (position) => {
          const listed = await listContactRows(db, accountId, { ...filters, ...position })
          // The request's one token was taken before; a page that examined many rows pays the rest.
          await deps.rateLimiter.chargeAccount(accountId, reply, scanCost(listed.examined) - 1)
          return listed
        })
      // The version is read before the rows: a change committed in between is in the page and
      // makes the version newer, so the tag sent can only be too old (a 200 later), never too new.
      const version = await contactsVersion(db, accountId)
      const tag = version && stampTag(listTagKey, `${accountId}\n${canonicalQuery(request.query)}\n${version}`)
      const preconditions = preconditionsOf(request)
      if (tag !== undefined && preconditions?.ifMatch === undefined && preconditions?.ifNoneMatch !== '*') {
        // The poller's path: a 304 without reading a contact. Only a tag this query was given can
        // match, so the query was valid (its cursor too); `*` and If-Match wait for the page, as a
        // request that fails without its conditions must fail the same with them (RFC 9110 §13.2.1).
        return answerConditionally(request, reply, tag, preconditions) ?? sendPageBody(reply, await page())
      }
      // No event to stamp a version with (none yet, or all purged): the tag of the page's bytes.
      const body = await page()
      return answerConditionally(request, reply, tag ?? bytesTag(body), preconditions) ?? sendPageBody(reply, body)
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
          201: taggedJsonResponse(ContactSchema, 'The contact, created.'),
          ...apiProblems(
            'insufficient_scope',
            'quota_exceeded',
            'contact_exists',
            ...IDEMPOTENCY_PROBLEMS,
            ...BODY_PROBLEMS,
          ),
        },
      },
      onSend: tagContact,
    },
    async (request, reply) => {
      const created = await deps.contacts.create(authOf(request).tenant, request.body, {
        inTransaction: storedWith(request, true),
      })
      return sendAnswer(reply, answerOf(created, true))
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
          200: taggedJsonResponse(ContactSchema, 'The contact with this email, updated.'),
          201: taggedJsonResponse(ContactSchema, 'The contact, created.'),
          ...apiProblems('insufficient_scope', 'quota_exceeded', ...IDEMPOTENCY_PROBLEMS, ...BODY_PROBLEMS),
        },
      },
      onSend: tagContact,
    },
    async (request, reply) => {
      const upserted = await deps.contacts.upsert(authOf(request).tenant, request.body, {
        inTransaction: storedWith(request),
      })
      return sendAnswer(reply, answerOf(upserted, upserted.created))
    },
  )

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getContact',
        summary: 'Get a contact',
        description:
          'A contact of this account; any other id, well-formed or not, is 404. With `If-None-Match` and its `ETag`: 304 while it is unchanged.',
        params: IdParams,
        querystring: NoQuery,
        headers: ReadConditionHeaders,
        response: {
          200: taggedJsonResponse(ContactSchema, 'The contact.'),
          304: notModifiedResponse('Not modified: the contact is as the ETag you sent says.'),
          ...apiProblems('not_found', 'precondition_failed'),
        },
      },
      config: EVALUATES_CONDITIONS,
    },
    async (request, reply) => {
      const body = await findStoredBody(db, 'contacts', authOf(request).tenant.id, request.params.id)
      if (body === undefined) {
        throw notFound()
      }
      return (
        answerConditionally(request, reply, bytesTag(body)) ?? sendAnswer(reply, { status: 200, body, location: null })
      )
    },
  )

  app.patch(
    '/:id',
    {
      schema: {
        operationId: 'updateContact',
        summary: 'Update a contact',
        description:
          'Merge semantics: an absent field is unchanged, null clears it; custom_fields merge per key and a null value deletes the key. With `If-Match` and the `ETag` you read: 412 `precondition_failed`, and no change, if the contact changed since (no lost update).',
        params: IdParams,
        querystring: NoQuery,
        headers: WriteConditionHeaders,
        body: ContactInputSchema,
        response: {
          200: taggedJsonResponse(ContactSchema, 'The contact, updated (unchanged when nothing changed).'),
          ...apiProblems('insufficient_scope', 'not_found', 'precondition_failed', 'contact_exists', ...BODY_PROBLEMS),
        },
      },
      config: EVALUATES_CONDITIONS,
      onSend: tagContact,
    },
    async (request, reply) => {
      const updated = await deps.contacts.update(authOf(request).tenant, request.params.id, request.body, {
        precondition: contactPrecondition(request),
      })
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
        description:
          'Deletes the contact and records a `contact.deleted` event; another id is 404. With `If-Match` and the `ETag` you read: 412 `precondition_failed`, and nothing deleted, if the contact changed since.',
        params: IdParams,
        querystring: NoQuery,
        headers: WriteConditionHeaders,
        response: {
          204: emptyResponse('Deleted.'),
          ...apiProblems('insufficient_scope', 'not_found', 'precondition_failed'),
        },
      },
      config: EVALUATES_CONDITIONS,
    },
    async (request, reply) => {
      const precondition = contactPrecondition(request)
      if (!(await deps.contacts.remove(authOf(request).tenant, request.params.id, { precondition }))) {
        throw notFound()
      }
      return reply.code(204).send(null)
    },
  )
}
