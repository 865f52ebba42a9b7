// @contacts-api/client: a typed client for the Contacts API.
export {
  type ClientOptions,
  type ContactsClient,
  createClient,
  type RequestOptions,
  type WriteOptions,
} from './client.js'
export { type CommandIo, runCommand } from './commands.js'
export {
  type Conditional,
  type ConditionalReadOptions,
  type ConditionalWriteOptions,
  etagOf,
  type Modified,
  type NotModified,
} from './conditional.js'
export { ApiError, type FieldError, type Problem } from './errors.js'
export type { AttemptInfo, FetchLike, RetryInfo } from './fetch.js'
export type { EventFollower, FollowOptions } from './follow.js'
export { type LastResponse, lastResponseOf, type WithLastResponse } from './last-response.js'
export type { components, operations, paths, webhooks } from './schema.js'
export type {
  Account,
  Contact,
  ContactBatch,
  ContactBatchOperation,
  ContactBatchResult,
  ContactBatchResults,
  ContactInput,
  ContactPage,
  ContactPatch,
  ContactUpsertInput,
  Event,
  EventPage,
  ListContactsQuery,
  ListEventsQuery,
  ListRequestLogsQuery,
  ListWebhookAttemptsQuery,
  ListWebhookDeliveriesQuery,
  ListWebhookEndpointsQuery,
  RecoverInput,
  RequestLog,
  RequestLogPage,
  RollSecretInput,
  WebhookAttempt,
  WebhookAttemptPage,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookEndpoint,
  WebhookEndpointInput,
  WebhookEndpointPage,
  WebhookEndpointPatch,
  WebhookEndpointWithSecret,
  WebhookEvent,
  WebhookRecovery,
} from './types.js'
export { USER_AGENT, VERSION } from './version.js'
export {
  type VerifyWebhookOptions,
  verifyWebhook,
  type WebhookHeadersLike,
  WebhookVerificationError,
} from './webhooks.js'
