// createClient: the API's resources as methods, over openapi-fetch and the generated types.
import createFetchClient, { type Client } from 'openapi-fetch'
import { ApiError } from './errors.js'
import { DEFAULT_RETRY, type FetchLike, type RetryOptions, retryingFetch } from './fetch.js'
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
  type ListWebhookDeliveriesQuery,
  type ListWebhookEndpointsQuery,
  type RollSecretInput,
  type WebhookDelivery,
  type WebhookDeliveryPage,
  type WebhookEndpoint,
  type WebhookEndpointInput,
  type WebhookEndpointPage,
  type WebhookEndpointPatch,
  type WebhookEndpointWithSecret,
} from './types.js'

export interface ClientOptions {
  /** Where the API is served, e.g. `https://contacts.example.com` (a trailing `/api/v1` is accepted too). */
  baseUrl: string
  /** The account's API key (`…_live_…`). Keep it on the server: never ship it to a browser. */
  apiKey: string
  /** Retries after the first attempt of a 429, 503 or network error (default 3; 0 turns retries off). */
  maxRetries?: number
  /** The first backoff's upper bound in ms, doubled per retry, full jitter (default 500). */
  retryBaseDelayMs?: number
  /** The longest wait between attempts in ms (default 30 000); a longer Retry-After is not waited for. */
  maxRetryDelayMs?: number
  /** The fetch to send requests with (default: the global fetch). */
  fetch?: FetchLike
  /** Extra headers on every request. */
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
async function* walk<K extends string, T, Q extends { after?: string }>(
  list: (query: Q) => Promise<Paged<K, T>>,
  key: K,
  query: Q,
): AsyncGenerator<T, void, undefined> {
  let page = await list(query)
  for (;;) {
    yield* page[key]
    if (page.next_cursor === null) {
      return
    }
    page = await list({ ...query, after: page.next_cursor })
  }
}

type Result<T> = { data?: T; error?: unknown; response: Response }

/** The body of a successful response, or ApiError. */
async function ok<T>(call: Result<T> | Promise<Result<T>>): Promise<T> {
  const { data, error, response } = await call
  if (!response.ok) {
    throw ApiError.from(response, error)
  }
  return data as T
}

const writeInit = (options: WriteOptions = {}) => ({
  ...(options.idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': options.idempotencyKey } }),
  ...(options.signal ? { signal: options.signal } : {}),
})

export function createClient(options: ClientOptions) {
  const retry: RetryOptions = {
    maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
    baseDelayMs: options.retryBaseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
    maxDelayMs: options.maxRetryDelayMs ?? DEFAULT_RETRY.maxDelayMs,
  }
  const inner: FetchLike = options.fetch ?? ((request) => globalThis.fetch(request))
  const api: Client<paths> = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, ''),
    headers: { ...options.headers, authorization: `Bearer ${options.apiKey}` },
    fetch: retryingFetch(inner, retry),
  })

  const contacts = {
    /** One page of contacts (`limit` 1–100, default 50; pass `next_cursor` back as `after`). */
    list: (query?: ListContactsQuery, init?: RequestOptions): Promise<ContactPage> =>
      ok(api.GET('/api/v1/contacts', { params: { query: exactQuery<'listContacts'>(query) }, ...init })),
    /** Every contact matching the filters, page after page: `for await (const contact of client.contacts.all({ tag }))`. */
    all: (query: Omit<ListContactsQuery, 'after'> = {}): AsyncGenerator<Contact, void, undefined> =>
      walk((q: ListContactsQuery) => contacts.list(q), 'contacts', query as ListContactsQuery),
    get: (id: string, init?: RequestOptions): Promise<Contact> =>
      ok(api.GET('/api/v1/contacts/{id}', { params: { path: { id } }, ...init })),
    /** 201 with the contact; ApiError `contact_exists` (409, `problem.existing_id`) when the email is taken. */
    create: (input: ContactInput, init?: WriteOptions): Promise<Contact> =>
      ok(api.POST('/api/v1/contacts', { body: input, ...writeInit(init) })),
    /** By email: creates the contact or updates it (`created` tells which). */
    upsert: async (input: ContactUpsertInput, init?: WriteOptions): Promise<{ contact: Contact; created: boolean }> => {
      const result = await api.POST('/api/v1/contacts/upsert', { body: input, ...writeInit(init) })
      const contact = await ok<Contact>(result as Result<Contact>)
      return { contact, created: result.response.status === 201 }
    },
    /** Merge semantics: an absent field is unchanged, `null` clears it, `custom_fields` merge per key. */
    update: (id: string, patch: ContactPatch, init?: RequestOptions): Promise<Contact> =>
      ok(api.PATCH('/api/v1/contacts/{id}', { params: { path: { id } }, body: patch, ...init })),
    delete: async (id: string, init?: RequestOptions): Promise<void> => {
      await ok(api.DELETE('/api/v1/contacts/{id}', { params: { path: { id } }, ...init }))
    },
    /**
     * Up to 100 creates, upserts, updates and deletes in one request, run in order. `results[i]`
     * answers `operations[i]`: `status` 201/200 with `contact`, 204, or a 4xx with `problem`; one
     * refused operation never fails the others. Retried safely: one Idempotency-Key covers the batch.
     */
    batch: (batch: ContactBatch, init?: WriteOptions): Promise<ContactBatchResults> =>
      ok(api.POST('/api/v1/contacts/batch', { body: batch, ...writeInit(init) })),
  }

  const events = {
    /** One page of events, in commit order. */
    list: (query?: ListEventsQuery, init?: RequestOptions): Promise<EventPage> =>
      ok(api.GET('/api/v1/events', { params: { query: exactQuery<'listEvents'>(query) }, ...init })),
    all: (query: Omit<ListEventsQuery, 'after'> = {}): AsyncGenerator<Event, void, undefined> =>
      walk((q: ListEventsQuery) => events.list(q), 'events', query as ListEventsQuery),
    get: (id: string, init?: RequestOptions): Promise<Event> =>
      ok(api.GET('/api/v1/events/{id}', { params: { path: { id } }, ...init })),
  }

  const deliveries = {
    list: (
      endpointId: string,
      query?: ListWebhookDeliveriesQuery,
      init?: RequestOptions,
    ): Promise<WebhookDeliveryPage> =>
      ok(
        api.GET('/api/v1/webhook_endpoints/{id}/deliveries', {
          params: { path: { id: endpointId }, query: exactQuery<'listWebhookDeliveries'>(query) },
          ...init,
        }),
      ),
    all: (
      endpointId: string,
      query: Omit<ListWebhookDeliveriesQuery, 'after'> = {},
    ): AsyncGenerator<WebhookDelivery, void, undefined> =>
      walk(
        (q: ListWebhookDeliveriesQuery) => deliveries.list(endpointId, q),
        'deliveries',
        query as ListWebhookDeliveriesQuery,
      ),
    get: (endpointId: string, deliveryId: string, init?: RequestOptions): Promise<WebhookDelivery> =>
      ok(
        api.GET('/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}', {
          params: { path: { id: endpointId, delivery_id: deliveryId } },
          ...init,
        }),
      ),
    /** 202: one more attempt, now. */
    retry: (endpointId: string, deliveryId: string, init?: WriteOptions): Promise<WebhookDelivery> =>
      ok(
        api.POST('/api/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry', {
          params: { path: { id: endpointId, delivery_id: deliveryId } },
          body: {},
          ...writeInit(init),
        }),
      ),
  }

  const webhookEndpoints = {
    list: (query?: ListWebhookEndpointsQuery, init?: RequestOptions): Promise<WebhookEndpointPage> =>
      ok(
        api.GET('/api/v1/webhook_endpoints', {
          params: { query: exactQuery<'listWebhookEndpoints'>(query) },
          ...init,
        }),
      ),
    all: (query: Omit<ListWebhookEndpointsQuery, 'after'> = {}): AsyncGenerator<WebhookEndpoint, void, undefined> =>
      walk(
        (q: ListWebhookEndpointsQuery) => webhookEndpoints.list(q),
        'webhook_endpoints',
        query as ListWebhookEndpointsQuery,
      ),
    get: (id: string, init?: RequestOptions): Promise<WebhookEndpoint> =>
      ok(api.GET('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, ...init })),
    /** The answer holds the signing secret (`whsec_…`): the only time the API shows it. */
    create: (input: WebhookEndpointInput, init?: WriteOptions): Promise<WebhookEndpointWithSecret> =>
      ok(api.POST('/api/v1/webhook_endpoints', { body: input, ...writeInit(init) })),
    update: (id: string, patch: WebhookEndpointPatch, init?: RequestOptions): Promise<WebhookEndpoint> =>
      ok(api.PATCH('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, body: patch, ...init })),
    delete: async (id: string, init?: RequestOptions): Promise<void> => {
      await ok(api.DELETE('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, ...init }))
    },
    /** A new signing secret; the old one keeps signing for `expire_old_in_seconds` (default 86 400). */
    rollSecret: (id: string, input: RollSecretInput = {}, init?: WriteOptions): Promise<WebhookEndpointWithSecret> =>
      ok(
        api.POST('/api/v1/webhook_endpoints/{id}/roll_secret', {
          params: { path: { id } },
          body: input,
          ...writeInit(init),
        }),
      ),
    /** 202: sends a `webhook.test` event to the endpoint. */
    test: (id: string, init?: WriteOptions): Promise<WebhookDelivery> =>
      ok(api.POST('/api/v1/webhook_endpoints/{id}/test', { params: { path: { id } }, body: {}, ...writeInit(init) })),
    deliveries,
  }

  return {
    /** The key's account, the key itself (never its secret) and the account's limits. */
    me: (init?: RequestOptions): Promise<Account> => ok(api.GET('/api/v1/me', { ...init })),
    contacts,
    events,
    webhookEndpoints,
    /** The underlying openapi-fetch client (same auth, Idempotency-Key and retries) for anything else. */
    raw: api,
  }
}

export type ContactsClient = ReturnType<typeof createClient>
