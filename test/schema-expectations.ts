// What the migrations are expected to produce, stated once for the CLI and migration suites.
import * as migrations from '../src/db/migrations/index.js'

/** Migration names in order, as the Migrator records them (the index's export names without the `m`). */
export const MIGRATIONS = Object.keys(migrations).map((name) => name.replace(/^m/, ''))

export const TABLES = [
  'accounts',
  'api_key_usage',
  'api_keys',
  'audit_log',
  'contact_counts',
  'contact_import_file_parts',
  'contact_imports',
  'contact_tags',
  'contact_terms',
  'contacts',
  'event_sequence',
  'events',
  'idempotency_keys',
  'invitations',
  'memberships',
  'request_log_chunks',
  'request_log_days',
  'sessions',
  'sign_in_failures',
  'users',
  'webhook_attempts',
  'webhook_deliveries',
  'webhook_dispatch',
  'webhook_endpoints',
]
