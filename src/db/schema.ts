// The whole database as Kysely sees it, assembled from each feature's table types.
import type { AccountsTable } from '../accounts/accounts.table.js'
import type { ApiKeysTable, ApiKeyUsageTable } from '../api-keys/api-keys.table.js'
import type { AuditLogTable } from '../audit/audit.table.js'
import type {
  ContactCountsTable,
  ContactsTable,
  ContactTagsTable,
  ContactTermsTable,
} from '../contacts/contacts.table.js'
import type { EventSequenceTable, EventsTable } from '../events/events.table.js'
import type { IdempotencyKeysTable } from '../idempotency/idempotency.table.js'
import type { ContactImportFilePartsTable, ContactImportsTable } from '../imports/imports.table.js'
import type { InvitationsTable } from '../invitations/invitations.table.js'
import type { RequestLogChunksTable, RequestLogDaysTable } from '../request-logs/request-logs.table.js'
import type { MembershipsTable, SessionsTable, SignInFailuresTable, UsersTable } from '../users/users.table.js'
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookDispatchTable,
  WebhookEndpointsTable,
} from '../webhooks/webhooks.table.js'

export interface Database {
  accounts: AccountsTable
  api_keys: ApiKeysTable
  contacts: ContactsTable
  contact_tags: ContactTagsTable
  contact_terms: ContactTermsTable
  contact_counts: ContactCountsTable
  contact_imports: ContactImportsTable
  contact_import_file_parts: ContactImportFilePartsTable
  events: EventsTable
  event_sequence: EventSequenceTable
  users: UsersTable
  memberships: MembershipsTable
  sessions: SessionsTable
  invitations: InvitationsTable
  api_key_usage: ApiKeyUsageTable
  idempotency_keys: IdempotencyKeysTable
  audit_log: AuditLogTable
  sign_in_failures: SignInFailuresTable
  webhook_endpoints: WebhookEndpointsTable
  webhook_deliveries: WebhookDeliveriesTable
  webhook_attempts: WebhookAttemptsTable
  webhook_dispatch: WebhookDispatchTable
  request_log_chunks: RequestLogChunksTable
  request_log_days: RequestLogDaysTable
}
