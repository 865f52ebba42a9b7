// Standard Webhooks headers for one delivery: the event id, the send time, one signature per live secret.
import { Webhook } from 'standardwebhooks'

export type WebhookHeaders = {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
  'content-type': 'application/json'
}

export type WebhookHeadersInput = {
  /** The event id: the same on every retry, so receivers can de-duplicate. */
  eventId: string
  /** When this attempt is sent (receivers reject timestamps more than ~5 minutes off). */
  timestamp: Date
  /** The exact bytes that will be sent as the body. */
  body: string
  /** Every live secret (`whsec_…`): two during a roll's overlap, so receivers may verify with either. */
  secrets: readonly string[]
}

/** Headers for one delivery attempt; `webhook-signature` holds one `v1,<base64>` per secret, space-separated. */
export function webhookHeaders({ eventId, timestamp, body, secrets }: WebhookHeadersInput): WebhookHeaders {
  if (secrets.length === 0) {
    throw new Error('A webhook delivery needs at least one signing secret')
  }
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(eventId, timestamp, body)).join(' '),
    'content-type': 'application/json',
  }
}
