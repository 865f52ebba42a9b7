/** A webhook endpoint (src/webhooks/endpoints.store.ts). Timestamps are ISO 8601 text. */
export interface WebhookEndpointsTable {
  account_id: string
  id: string
  url: string
  description: string | null
  /** JSON array of event types, or `["*"]`. */
  events: string
  status: 'enabled' | 'disabled'
  disabled_reason: 'manual' | 'failing' | 'gone' | null
  /** The signing secret, encrypted (secrets.ts). */
  secret: string
  previous_secret: string | null
  previous_secret_expires_at: string | null
  failing_since: string | null
  /** No delivery of this endpoint is due before this time; null when none is pending (docs/design.md#delivery-queue). */
  due_at: string | null
  created_at: string
  updated_at: string
}

export interface WebhookDeliveriesTable {
  account_id: string
  id: string
  endpoint_id: string
  event_id: string
  event_type: string
  event_created_at: string
  status: 'pending' | 'retrying' | 'succeeded' | 'failed'
  attempts: number
  next_attempt_at: string | null
  lease_expires_at: string | null
  last_attempt_at: string | null
  last_status_code: number | null
  last_duration_ms: number | null
  last_error: string | null
  last_response_excerpt: string | null
  payload: string | null
  created_at: string
}

/** One attempt of a delivery; `attempt` counts from 1 (delivery-attempts.ts writes them). */
export interface WebhookAttemptsTable {
  account_id: string
  delivery_id: string
  attempt: number
  at: string
  status_code: number | null
  duration_ms: number
  error: string | null
  response_excerpt: string
}

/** Where the fan-out has got to in the events feed: one row, `events`. */
export interface WebhookDispatchTable {
  name: string
  tx_id: number
  event_id: string
}
