// verifyWebhook: checks a delivery's Standard Webhooks signature and returns its typed payload; and
// the signing side, for listen.ts, which forwards events as deliveries.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { WebhookEvent } from './types.js'

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError'
}

/** Node's `IncomingHttpHeaders`, a fetch `Headers`, or a plain object of header names to values. */
export type WebhookHeadersLike = Headers | Record<string, string | string[] | undefined>

export interface VerifyWebhookOptions {
  /** Largest accepted distance between `webhook-timestamp` and now, in seconds (default 300). */
  toleranceSeconds?: number
  /** The current time (tests). */
  now?: Date
}

const DEFAULT_TOLERANCE_SECONDS = 5 * 60

/**
 * Verifies one webhook delivery (Standard Webhooks: HMAC-SHA256 over `${id}.${timestamp}.${body}`
 * with the base64 key after `whsec_`) and returns its parsed payload, or throws
 * WebhookVerificationError. Pass the raw body exactly as received (not re-serialized JSON). During a
 * secret roll the delivery carries one signature per live secret; `secret` may also list several.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  body: string | Uint8Array,
  headers: WebhookHeadersLike,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const id = header(headers, 'webhook-id')
  const timestamp = header(headers, 'webhook-timestamp')
  const signatures = header(headers, 'webhook-signature')
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature header')
  }
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError('Invalid webhook-timestamp header')
  }
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000)
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS
  if (Math.abs(now - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError('Webhook timestamp is outside the tolerance (replayed or clock skew)')
  }
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body)
  const offered = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => Buffer.from(entry.slice(3), 'base64'))
  const secrets = typeof secret === 'string' ? [secret] : secret
  if (secrets.length === 0) {
    throw new WebhookVerificationError('No signing secret given')
  }
  const matched = secrets.some((one) => {
    const expected = signature(one, id, timestamp, bytes)
    return offered.some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected))
  })
  if (!matched) {
    throw new WebhookVerificationError('No matching webhook signature')
  }
  try {
    return JSON.parse(bytes.toString('utf8')) as WebhookEvent
  } catch {
    throw new WebhookVerificationError('The webhook body is not JSON')
  }
}

/** HMAC-SHA256 over `${id}.${timestamp}.${body}` with the secret's key. */
function signature(secret: string, id: string, timestamp: string, body: Uint8Array): Buffer {
  return createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.`, 'utf8').update(body).digest()
}

/** A new signing secret: `whsec_` and the base64 of 32 random bytes, as the API's own. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`

/** The Standard Webhooks headers of one delivery of `body`, signed with `secret`. */
export function webhookHeaders(
  secret: string,
  delivery: { id: string; timestamp: Date; body: string },
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const timestamp = String(Math.floor(delivery.timestamp.getTime() / 1000))
  const signed = signature(secret, delivery.id, timestamp, Buffer.from(delivery.body, 'utf8'))
  return {
    'webhook-id': delivery.id,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1,${signed.toString('base64')}`,
  }
}

function keyOf(secret: string): Buffer {
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret
  const key = Buffer.from(encoded, 'base64')
  if (key.length === 0) {
    throw new WebhookVerificationError('The signing secret is empty or not base64')
  }
  return key
}

function header(headers: WebhookHeadersLike, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') {
    return (headers as Headers).get(name) ?? undefined
  }
  const record = headers as Record<string, string | string[] | undefined>
  const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return Array.isArray(value) ? value.join(' ') : value
}
