// Named types for the API's resources, derived from the generated schema (src/schema.ts) through
// the operations, so they hold whatever the document names its component schemas.
import type { operations, webhooks } from './schema.js'

type JsonOf<R> = R extends { content: { 'application/json': infer Body } } ? Body : never
type Responses<K extends keyof operations> = operations[K]['responses']
/** The JSON body of operation K's response with status S. */
export type ResponseBody<K extends keyof operations, S extends keyof Responses<K>> = JsonOf<Responses<K>[S]>
/** The JSON request body of operation K. */
export type RequestBody<K extends keyof operations> = operations[K] extends { requestBody?: infer B }
  ? JsonOf<NonNullable<B>>
  : never
/** Operation K's query parameters, every one optional (the server has a default for each). */
export type QueryOf<K extends keyof operations> = operations[K]['parameters'] extends { query?: infer Q }
  ? Partial<NonNullable<Q>>
  : never
type ExactQuery<K extends keyof operations> = operations[K]['parameters'] extends { query?: infer Q }
  ? NonNullable<Q>
  : never
/** For the client's own calls: a query whose parameters are all optional, as the document will say. */
export const exactQuery = <K extends keyof operations>(query: QueryOf<K> | undefined): ExactQuery<K> =>
  (query ?? {}) as ExactQuery<K>

export type Account = ResponseBody<'getAccount', 200>

export type Contact = ResponseBody<'getContact', 200>
export type ContactInput = RequestBody<'createContact'>
export type ContactUpsertInput = RequestBody<'upsertContact'>
export type ContactPatch = RequestBody<'updateContact'>
export type ContactPage = ResponseBody<'listContacts', 200>
export type ListContactsQuery = QueryOf<'listContacts'>
/** POST /contacts/batch: `{ operations: [...] }`, 1 to 100 of them. */
export type ContactBatch = RequestBody<'batchContacts'>
/** One operation of a batch, told apart by `op`: create, upsert, update or delete. */
export type ContactBatchOperation = ContactBatch['operations'][number]
/** The answer to a batch: `results[i]` answers `operations[i]`. */
export type ContactBatchResults = ResponseBody<'batchContacts', 200>
/**
 * One operation's result, told apart by `status`: 201 or 200 with `contact`, 204, or a 4xx with
 * `problem` (what the single endpoint would have answered).
 */
export type ContactBatchResult = ContactBatchResults['results'][number]

export type Event = ResponseBody<'getEvent', 200>
export type EventPage = ResponseBody<'listEvents', 200>
export type ListEventsQuery = QueryOf<'listEvents'>

export type WebhookEndpoint = ResponseBody<'getWebhookEndpoint', 200>
/** A created endpoint, or one whose secret was rolled: with its signing secret (shown only then). */
export type WebhookEndpointWithSecret = ResponseBody<'createWebhookEndpoint', 201>
export type WebhookEndpointInput = RequestBody<'createWebhookEndpoint'>
export type WebhookEndpointPatch = RequestBody<'updateWebhookEndpoint'>
export type RollSecretInput = RequestBody<'rollWebhookEndpointSecret'>
export type WebhookEndpointPage = ResponseBody<'listWebhookEndpoints', 200>
export type ListWebhookEndpointsQuery = QueryOf<'listWebhookEndpoints'>

export type WebhookDelivery = ResponseBody<'getWebhookDelivery', 200>
export type WebhookDeliveryPage = ResponseBody<'listWebhookDeliveries', 200>
export type ListWebhookDeliveriesQuery = QueryOf<'listWebhookDeliveries'>
/** One attempt of a delivery: when, the receiver's status, how long, why it failed, its answer's start. */
export type WebhookAttempt = WebhookAttemptPage['attempts'][number]
export type WebhookAttemptPage = ResponseBody<'listWebhookAttempts', 200>
export type ListWebhookAttemptsQuery = QueryOf<'listWebhookAttempts'>
/** `since` and optional `until` (RFC 3339): the failed deliveries created in between are resent. */
export type RecoverInput = RequestBody<'recoverWebhookDeliveries'>
export type WebhookRecovery = ResponseBody<'recoverWebhookDeliveries', 202>

export type RequestLog = ResponseBody<'getRequestLog', 200>
export type RequestLogPage = ResponseBody<'listRequestLogs', 200>
/** Filters: `status` (`404` or `4xx`), `key_id`, `method`, `path` (a prefix), `created_after`, `created_before`. */
export type ListRequestLogsQuery = QueryOf<'listRequestLogs'>

/** A webhook delivery's body: one member per event type, discriminated by `type`. */
export type WebhookEvent = {
  [Type in keyof webhooks]: webhooks[Type] extends { post: { requestBody: infer B } } ? JsonOf<B> : never
}[keyof webhooks]
