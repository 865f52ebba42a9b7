// The body a delivery sends, `{"type","timestamp","livemode","data":{"object":…}}`: from the stored
// event, or the delivery's own payload for a webhook.test.
import type { WebhookDeliveriesTable } from './webhooks.table.js'

// events.ts newEvent writes every event as {"object","id","type","created_at","livemode","data":{…}}
// with `data` last, and no earlier member can contain this text: the data member is the event's tail.
const DATA_MEMBER = ',"data":'

/** The delivery body for a stored event's body (as events.body holds it). */
export function eventPayload(eventBody: string): string {
  const at = eventBody.indexOf(DATA_MEMBER)
  if (at < 0 || !eventBody.endsWith('}')) {
    throw new Error('stored event body is not in the form newEvent writes')
  }
  const event = JSON.parse(`${eventBody.slice(0, at)}}`) as { type: string; created_at: string; livemode: boolean }
  return `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(event.created_at)},"livemode":${event.livemode === true}${eventBody.slice(at)}`
}

/** The body of this delivery: its own payload, or its event's (undefined once the event is purged). */
export function deliveryPayload(
  delivery: Pick<WebhookDeliveriesTable, 'payload'>,
  eventBody: string | undefined,
): string | undefined {
  return delivery.payload ?? (eventBody === undefined ? undefined : eventPayload(eventBody))
}
