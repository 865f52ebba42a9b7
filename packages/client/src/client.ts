// createClient: the API's resources as methods, over openapi-fetch and the generated types.
import createFetchClient, { type Client } from 'openapi-fetch'
import {
  type Conditional,
  type ConditionalReadOptions,
  type ConditionalWriteOptions,
  rememberEtag,
} from './conditional.js'
import { ApiError } from './errors.js'
import {
  type AttemptInfo,
  DEFAULT_RETRY,
  type FetchLike,
  type RetryInfo,
  type RetryOptions,
  retryingFetch,
} from './fetch.js'
import { type EventFollower, type FollowOptions, followEvents } from './follow.js'
import { describeResponse, itemsOf, type WithLastResponse, withLastResponse } from './last-response.js'
import type { paths } from './schema.js'
import {
  type Account,
  type Contact,
  type ContactBatch,
  type ContactBatchResults,
  type ContactInput,
  type ContactPage,
  type ContactPatch,
  type ContactUpsertInput,
  type Event,
  type EventPage,
  exactQuery,
  type ListContactsQuery,
  type ListEventsQuery,
  type ListRequestLogsQuery,
  type ListWebhookAttemptsQuery,
  type ListWebhookDeliveriesQuery,
  type ListWebhookEndpointsQuery,
  type RecoverInput,
  type RequestLog,
  type RequestLogPage,
  type RollSecretInput,
  type WebhookAttempt,
  type WebhookAttemptPage,
  type WebhookDelivery,
  type WebhookDeliveryPage,
  type WebhookEndpoint,
  type WebhookEndpointInput,
  type WebhookEndpointPage,
  type WebhookEndpointPatch,
  type WebhookEndpointWithSecret,
  type WebhookRecovery,
} from './types.js'
import { USER_AGENT } from './version.js'

export interface ClientOptions {
  /** Where the API is served, e.g. `https://contacts.example.com` (a trailing `/api/v1` is accepted too). */
  baseUrl: string
  /** The account's API key (`…_live_…`, or `…_test_…` for its test mode). Keep it on the server: never ship it to a browser. */
  apiKey: string
  /**
   * Retries after the first attempt of a 429, 503, 409 `idempotency_key_in_use` or network error
   * (default 8: each waits Retry-After, at least 1 s on a 429, plus the jitter, so a burst is ridden
   * out for well over 10 s; 0 turns retries off).
   */
  maxRetries?: number
  /** The first backoff's upper bound in ms, doubled per retry, full jitter (default 500). */
  retryBaseDelayMs?: number
  /** The longest wait between attempts in ms (default 30 000); a longer Retry-After is not waited for. */
  maxRetryDelayMs?: number
  /** Called before each attempt (1 for the first, 2 for the first retry, …): method, URL, attempt. */
  onRequest?: (info: AttemptInfo) => void
  /** Called before each retry's wait: the attempt to come, the wait in ms, and why (status or network error). */
  onRetry?: (info: RetryInfo) => void
  /** The fetch to send requests with (default: the global fetch). */
  fetch?: FetchLike
  /** Extra headers on every request (a `user-agent` here replaces the client's own). */
  headers?: Record<string, string>
}

/** Per-request options of a POST. */
export interface WriteOptions {
  /** The Idempotency-Key to send (default: a random UUID, the same on every retry). */
  idempotencyKey?: string
  signal?: AbortSignal
}

export interface RequestOptions {
  signal?: AbortSignal
}

type Paged<K extends string, T> = { [key in K]: T[] } & { next_cursor: string | null }

/** Every item of every page, fetching the next page only when the previous one is used up. */
async function* walk<K extends string, T, Q extends { after?: string; limit?: number }>(
  list: (query: Q) => Promise<WithLastResponse<Paged<K, T>>>,
  key: K,
  query: Q,
  feed = false,
): AsyncGenerator<WithLastResponse<T>, void, undefined> {
  let page = await list(query)
  for (;;) {
    yield* itemsOf(page[key], page)
    // The events feed's cursor never ends: its end, for now, is a page short of the limit.
    if (page.next_cursor === null || (feed && page[key].length < (query.limit ?? DEFAULT_LIMIT))) {
      return
    }
    page = await list({ ...query, after: page.next_cursor })
  }
}

/** The server's page size when a query gives no `limit`. */
const DEFAULT_LIMIT = 50

type Result<T> = { data?: T; error?: unknown; response: Response }

/** The body of a successful response, with the response beside it as `lastResponse`, or ApiError. */
async function ok<T>(call: Result<T> | Promise<Result<T>>): Promise<WithLastResponse<T>> {
  const { data, error, response } = await call
  if (!response.ok) {
    throw ApiError.from(response, error)
  }
  return withLastResponse(data as T, describeResponse(response))
}

/** As ok, remembering the response's ETag for etagOf. */
async function tagged<T>(call: Result<T> | Promise<Result<T>>): Promise<WithLastResponse<T>> {
  const result = await call
  return rememberEtag(await ok(result), result.response)
}

/** A read sent with If-None-Match: 304 is `{ notModified: true }`, a 200 the new copy and its tag. */
async function conditional<T>(call: Promise<Result<T>>): Promise<Conditional<T>> {
  const result = await call
  const etag = result.response.headers.get('etag') ?? undefined
  if (result.response.status === 304) {
    // No body to carry the answer: the `{ notModified }` object carries it.
    return withLastResponse({ notModified: true, etag }, describeResponse(result.response))
  }
  const data = await tagged(result)
  return withLastResponse({ notModified: false, etag, data }, data.lastResponse)
}

/** A read without `ifNoneMatch`: the plain answer (so a ConditionalReadOptions never picks this overload). */
type PlainRead = RequestOptions & { ifNoneMatch?: never }

/** Whether a read asked for a conditional answer (the `ifNoneMatch` key is there, even undefined). */
const isConditional = (init: object | undefined): init is ConditionalReadOptions =>
  init !== undefined && 'ifNoneMatch' in init

/** The If-None-Match of a conditional read, as an openapi-fetch `params.header`. */
const ifNoneMatchHeader = (init: RequestOptions | ConditionalReadOptions = {}) =>
  'ifNoneMatch' in init && init.ifNoneMatch !== undefined ? { header: { 'If-None-Match': init.ifNoneMatch } } : {}

/** The If-Match of a conditional write, as an openapi-fetch `params.header`. */
const ifMatchHeader = ({ ifMatch }: ConditionalWriteOptions = {}) =>
  ifMatch === undefined ? {} : { header: { 'If-Match': ifMatch } }

const writeInit = (options: WriteOptions = {}) => ({
  ...(options.idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': options.idempotencyKey } }),
  ...(options.signal ? { signal: options.signal } : {}),
})

const signalOf = (init: { signal?: AbortSignal } = {}) => (init.signal ? { signal: init.signal } : {})

/** The client's own User-Agent, unless the caller's headers name one (in any case). */
const userAgentUnless = (headers: Record<string, string> = {}) =>
  Object.keys(headers).some((name) => name.toLowerCase() === 'user-agent') ? {} : { 'user-agent': USER_AGENT }

export function createClient(options: ClientOptions) {
  const retry: RetryOptions = {
    maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
    baseDelayMs: options.retryBaseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
    maxDelayMs: options.maxRetryDelayMs ?? DEFAULT_RETRY.maxDelayMs,
  }
  const inner: FetchLike = options.fetch ?? ((request) => globalThis.fetch(request))
  const api: Client<paths> = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, ''),
    headers: { ...userAgentUnless(options.headers), ...options.headers, authorization: `Bearer ${options.apiKey}` },
    // The hooks see the method and URL, never the headers: the key stays out of integrators' logs.
    fetch: retryingFetch(inner, retry, undefined, { onRequest: options.onRequest, onRetry: options.onRetry }),
  })

  /**
   * One page of contacts (`limit` 1–100, default 50; pass `next_cursor` back as `after`). With
   * `{ ifNoneMatch }` (a previous page's `etag`): `{ notModified: true }` while no contact of the
   * account changed, a cheap way to poll.
   */
  function listContacts(
    query: ListContactsQuery | undefined,
    init: ConditionalReadOptions,
  ): Promise<Conditional<ContactPage>>
  function listContacts(query?: ListContactsQuery, init?: PlainRead): Promise<WithLastResponse<ContactPage>>
  function listContacts(
    query?: ListContactsQuery,
    init?: RequestOptions | ConditionalReadOptions,
  ): Promise<WithLastResponse<ContactPage> | Conditional<ContactPage>> {
    const call = api.GET('/api/v1/contacts', {
      params: { query: exactQuery<'listContacts'>(query), ...ifNoneMatchHeader(init) },
      ...signalOf(init),
    })
    return isConditional(init) ? conditional(call) : tagged(call)
  }

  /** A contact. With `{ ifNoneMatch }` (the `etagOf` your copy): `{ notModified: true }` while it is unchanged. */
  function getContact(id: string, init: ConditionalReadOptions): Promise<Conditional<Contact>>
  function getContact(id: string, init?: PlainRead): Promise<WithLastResponse<Contact>>
  function getContact(
    id: string,
    init?: RequestOptions | ConditionalReadOptions,
  ): Promise<WithLastResponse<Contact> | Conditional<Contact>> {
    const call = api.GET('/api/v1/contacts/{id}', {
      params: { path: { id }, ...ifNoneMatchHeader(init) },
      ...signalOf(init),
    })
    return isConditional(init) ? conditional(call) : tagged(call)
  }

  const contacts = {
    list: listContacts,
    /** Every contact matching the filters, page after page: `for await (const contact of client.contacts.all({ tag }))`. */
    all: (query: Omit<ListContactsQuery, 'after'> = {}): AsyncGenerator<WithLastResponse<Contact>, void, undefined> =>
      walk((q: ListContactsQuery) => contacts.list(q), 'contacts', query as ListContactsQuery),
    get: getContact,
    /** 201 with the contact; ApiError `contact_exists` (409, `problem.existing_id`) when the email is taken. */
    create: (input: ContactInput, init?: WriteOptions): Promise<WithLastResponse<Contact>> =>
      tagged(api.POST('/api/v1/contacts', { body: input, ...writeInit(init) })),
    /** By email: creates the contact or updates it (`created` tells which). */
    upsert: async (
      input: ContactUpsertInput,
      init?: WriteOptions,
    ): Promise<WithLastResponse<{ contact: WithLastResponse<Contact>; created: boolean }>> => {
      const result = await api.POST('/api/v1/contacts/upsert', { body: input, ...writeInit(init) })
      const contact = await tagged<Contact>(result as Result<Contact>)
      return withLastResponse({ contact, created: result.response.status === 201 }, contact.lastResponse)
    },
    /**
     * Merge semantics: an absent field is unchanged, `null` clears it, `custom_fields` merge per key.
     * With `{ ifMatch: etagOf(contact) }`: only if nobody changed it since (else ApiError `precondition_failed`).
     */
    update: (id: string, patch: ContactPatch, init?: ConditionalWriteOptions): Promise<WithLastResponse<Contact>> =>
      tagged(
        api.PATCH('/api/v1/contacts/{id}', {
          params: { path: { id }, ...ifMatchHeader(init) },
          body: patch,
          ...signalOf(init),
        }),
      ),
    /** With `{ ifMatch: etagOf(contact) }`: only if nobody changed it since (else ApiError `precondition_failed`). */
    delete: async (id: string, init?: ConditionalWriteOptions): Promise<void> => {
      await ok(
        api.DELETE('/api/v1/contacts/{id}', {
          params: { path: { id }, ...ifMatchHeader(init) },
          ...signalOf(init),
        }),
      )
    },
    /**
     * Up to 100 creates, upserts, updates and deletes in one request, run in order. `results[i]`
     * answers `operations[i]`: `status` 201/200 with `contact`, 204, or a 4xx with `problem`; one
     * refused operation never fails the others. Retried safely: one Idempotency-Key covers the batch.
     */
    batch: (batch: ContactBatch, init?: WriteOptions): Promise<WithLastResponse<ContactBatchResults>> =>
      ok(api.POST('/api/v1/contacts/batch', { body: batch, ...writeInit(init) })),
  }

  const events = {
    /** One page of events, in commit order. */
    list: (query?: ListEventsQuery, init?: RequestOptions): Promise<WithLastResponse<EventPage>> =>
      ok(api.GET('/api/v1/events', { params: { query: exactQuery<'listEvents'>(query) }, ...init })),
    all: (query: Omit<ListEventsQuery, 'after'> = {}): AsyncGenerator<WithLastResponse<Event>, void, undefined> =>
      walk((q: ListEventsQuery) => events.list(q), 'events', query as ListEventsQuery, true),
    /**
     * Every event from a stored cursor (`after`) or from now, forever: long-polls at the end of the
     * feed. `.cursor` is where to resume; `signal` or `break` ends it.
     */
    follow: (options?: FollowOptions): EventFollower =>
      followEvents((query, init) => events.list(query, init), options),
    get: (id: string, init?: RequestOptions): Promise<WithLastResponse<Event>> =>
      ok(api.GET('/api/v1/events/{id}', { params: { path: { id } }, ...init })),
  }

  const attempts = {
    /** One page of a delivery's attempts, oldest first. */
    list: (
      endpointId: string,
      deliveryId: string,
      query?: ListWebhookAttemptsQuery,
      init?: RequestOptions,
    ): Promise<WithLastResponse<WebhookAttemptPage>> =>
      ok(
        api.GET('/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/attempts', {
          params: {
            path: { id: endpointId, delivery_id: deliveryId },
            query: exactQuery<'listWebhookAttempts'>(query),
          },
          ...init,
        }),
      ),
    all: (
      endpointId: string,
      deliveryId: string,
      query: Omit<ListWebhookAttemptsQuery, 'after'> = {},
    ): AsyncGenerator<WithLastResponse<WebhookAttempt>, void, undefined> =>
      walk(
        (q: ListWebhookAttemptsQuery) => attempts.list(endpointId, deliveryId, q),
        'attempts',
        query as ListWebhookAttemptsQuery,
      ),
  }

  const deliveries = {
    list: (
      endpointId: string,
      query?: ListWebhookDeliveriesQuery,
      init?: RequestOptions,
    ): Promise<WithLastResponse<WebhookDeliveryPage>> =>
      ok(
        api.GET('/api/v1/webhook_endpoints/{id}/deliveries', {
          params: { path: { id: endpointId }, query: exactQuery<'listWebhookDeliveries'>(query) },
          ...init,
        }),
      ),
    all: (
      endpointId: string,
      query: Omit<ListWebhookDeliveriesQuery, 'after'> = {},
    ): AsyncGenerator<WithLastResponse<WebhookDelivery>, void, undefined> =>
      walk(
        (q: ListWebhookDeliveriesQuery) => deliveries.list(endpointId, q),
        'deliveries',
        query as ListWebhookDeliveriesQuery,
      ),
    get: (endpointId: string, deliveryId: string, init?: RequestOptions): Promise<WithLastResponse<WebhookDelivery>> =>
      ok(
        api.GET('/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}', {
          params: { path: { id: endpointId, delivery_id: deliveryId } },
          ...init,
        }),
      ),
    attempts,
    /** 202: one more attempt, now. */
    retry: (endpointId: string, deliveryId: string, init?: WriteOptions): Promise<WithLastResponse<WebhookDelivery>> =>
      ok(
        api.POST('/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry', {
          params: { path: { id: endpointId, delivery_id: deliveryId } },
          body: {},
          ...writeInit(init),
        }),
      ),
  }

  const webhookEndpoints = {
    list: (query?: ListWebhookEndpointsQuery, init?: RequestOptions): Promise<WithLastResponse<WebhookEndpointPage>> =>
      ok(
        api.GET('/api/v1/webhook_endpoints', {
          params: { query: exactQuery<'listWebhookEndpoints'>(query) },
          ...init,
        }),
      ),
    all: (
      query: Omit<ListWebhookEndpointsQuery, 'after'> = {},
    ): AsyncGenerator<WithLastResponse<WebhookEndpoint>, void, undefined> =>
      walk(
        (q: ListWebhookEndpointsQuery) => webhookEndpoints.list(q),
        'webhook_endpoints',
        query as ListWebhookEndpointsQuery,
      ),
    get: (id: string, init?: RequestOptions): Promise<WithLastResponse<WebhookEndpoint>> =>
      ok(api.GET('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, ...init })),
    /** The answer holds the signing secret (`whsec_…`): the only time the API shows it. */
    create: (input: WebhookEndpointInput, init?: WriteOptions): Promise<WithLastResponse<WebhookEndpointWithSecret>> =>
      ok(api.POST('/api/v1/webhook_endpoints', { body: input, ...writeInit(init) })),
    update: (
      id: string,
      patch: WebhookEndpointPatch,
      init?: RequestOptions,
    ): Promise<WithLastResponse<WebhookEndpoint>> =>
      ok(api.PATCH('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, body: patch, ...init })),
    delete: async (id: string, init?: RequestOptions): Promise<void> => {
      await ok(api.DELETE('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, ...init }))
    },
    /** A new signing secret; the old one keeps signing for `expire_old_in_seconds` (default 86 400). */
    rollSecret: (
      id: string,
      input: RollSecretInput = {},
      init?: WriteOptions,
    ): Promise<WithLastResponse<WebhookEndpointWithSecret>> =>
      ok(
        api.POST('/api/v1/webhook_endpoints/{id}/roll_secret', {
          params: { path: { id } },
          body: input,
          ...writeInit(init),
        }),
      ),
    /** 202: sends a `webhook.test` event to the endpoint. */
    test: (id: string, init?: WriteOptions): Promise<WithLastResponse<WebhookDelivery>> =>
      ok(api.POST('/api/v1/webhook_endpoints/{id}/test', { params: { path: { id } }, body: {}, ...writeInit(init) })),
    /** 202: every `failed` delivery created in [`since`, `until`) is attempted once more; `queued` says how many. */
    recover: (id: string, input: RecoverInput, init?: WriteOptions): Promise<WithLastResponse<WebhookRecovery>> =>
      ok(
        api.POST('/api/v1/webhook_endpoints/{id}/recover', {
          params: { path: { id } },
          body: input,
          ...writeInit(init),
        }),
      ),
    deliveries,
  }

  const requestLogs = {
    /** One page of the requests made with the account's keys in this mode, newest first (a full-access key). */
    list: (query?: ListRequestLogsQuery, init?: RequestOptions): Promise<WithLastResponse<RequestLogPage>> =>
      ok(api.GET('/api/v1/request_logs', { params: { query: exactQuery<'listRequestLogs'>(query) }, ...init })),
    all: (
      query: Omit<ListRequestLogsQuery, 'after'> = {},
    ): AsyncGenerator<WithLastResponse<RequestLog>, void, undefined> =>
      walk((q: ListRequestLogsQuery) => requestLogs.list(q), 'request_logs', query as ListRequestLogsQuery),
    /** One request by the `Request-Id` of its response (also `ApiError.requestId`). */
    get: (id: string, init?: RequestOptions): Promise<WithLastResponse<RequestLog>> =>
      ok(api.GET('/api/v1/request_logs/{id}', { params: { path: { id } }, ...init })),
  }

  return {
    /** The key's account, the key itself (never its secret) and the account's limits. */
    me: (init?: RequestOptions): Promise<WithLastResponse<Account>> => ok(api.GET('/api/v1/me', { ...init })),
    contacts,
    events,
    webhookEndpoints,
    requestLogs,
    /**
     * The underlying openapi-fetch client (same auth, Idempotency-Key, retries and hooks) for anything
     * else; its results are openapi-fetch's `{ data, error, response }`, without `lastResponse`.
     */
    raw: api,
  }
}

export type ContactsClient = ReturnType<typeof createClient>
