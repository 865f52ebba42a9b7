// verifyWebhook against signatures made by the server's own signing code (src/webhooks/signing.ts).
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { webhookHeaders } from '../../../src/webhooks/signing.js'
import { verifyWebhook, type WebhookEvent, WebhookVerificationError } from '../src/index.js'

const secret = () => `whsec_${randomBytes(32).toString('base64')}`
const now = new Date('2026-11-24T12:00:00.000Z')
const event = {
  type: 'contact.created',
  timestamp: '2026-11-24T11:59:59.000Z',
  data: {
    object: {
      object: 'contact',
      id: 'con_01',
      email: 'ada@example.com',
      first_name: 'Ada',
      last_name: null,
      phone: null,
      company: null,
      job_title: null,
      tags: [],
      custom_fields: {},
      created_at: '2026-11-24T11:59:59.000Z',
      updated_at: '2026-11-24T11:59:59.000Z',
    },
  },
}
const body = JSON.stringify(event)

describe('verifyWebhook', () => {
  it('accepts a delivery signed by the server and returns its typed payload', () => {
    const key = secret()
    const headers = webhookHeaders({ eventId: 'evt_1', timestamp: now, body, secrets: [key] })
    const verified: WebhookEvent = verifyWebhook(key, body, headers, { now })
    expect(verified).toEqual(event)
    if (verified.type === 'contact.created') {
      expect(verified.data.object.email).toBe('ada@example.com') // narrowed by `type`
    }
    // A fetch Headers, a Buffer body, and Node's IncomingHttpHeaders shape all work.
    expect(verifyWebhook(key, Buffer.from(body), new Headers(headers), { now })).toEqual(event)
  })

  it('accepts either signature during a secret roll, and either secret of the caller', () => {
    const [oldKey, newKey] = [secret(), secret()]
    const headers = webhookHeaders({ eventId: 'evt_2', timestamp: now, body, secrets: [oldKey, newKey] })
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2)
    expect(verifyWebhook(oldKey, body, headers, { now })).toEqual(event)
    expect(verifyWebhook(newKey, body, headers, { now })).toEqual(event)
    const single = webhookHeaders({ eventId: 'evt_3', timestamp: now, body, secrets: [newKey] })
    expect(verifyWebhook([oldKey, newKey], body, single, { now })).toEqual(event)
  })

  it('rejects a tampered body, id, timestamp or signature, another secret, and a missing header', () => {
    const key = secret()
    const headers = webhookHeaders({ eventId: 'evt_4', timestamp: now, body, secrets: [key] })
    const rejects = (run: () => unknown) => expect(run).toThrow(WebhookVerificationError)
    rejects(() => verifyWebhook(key, body.replace('ada@', 'eve@'), headers, { now }))
    rejects(() => verifyWebhook(key, `${body} `, headers, { now }))
    rejects(() => verifyWebhook(key, body, { ...headers, 'webhook-id': 'evt_5' }, { now }))
    const later = String(Number(headers['webhook-timestamp']) + 1)
    rejects(() => verifyWebhook(key, body, { ...headers, 'webhook-timestamp': later }, { now }))
    const signature = headers['webhook-signature']
    const flipped = `${signature.slice(0, 5)}${signature[5] === 'A' ? 'B' : 'A'}${signature.slice(6)}`
    rejects(() => verifyWebhook(key, body, { ...headers, 'webhook-signature': flipped }, { now }))
    rejects(() =>
      verifyWebhook(key, body, { ...headers, 'webhook-signature': signature.replace('v1,', 'v2,') }, { now }),
    )
    rejects(() => verifyWebhook(secret(), body, headers, { now }))
    const { 'webhook-signature': _, ...unsigned } = headers
    rejects(() => verifyWebhook(key, body, unsigned, { now }))
  })

  it('rejects a timestamp more than 5 minutes away, either side', () => {
    const key = secret()
    const old = webhookHeaders({ eventId: 'evt_6', timestamp: new Date(now.getTime() - 301_000), body, secrets: [key] })
    expect(() => verifyWebhook(key, body, old, { now })).toThrow(/tolerance/)
    const future = webhookHeaders({
      eventId: 'evt_7',
      timestamp: new Date(now.getTime() + 301_000),
      body,
      secrets: [key],
    })
    expect(() => verifyWebhook(key, body, future, { now })).toThrow(/tolerance/)
    const recent = webhookHeaders({
      eventId: 'evt_8',
      timestamp: new Date(now.getTime() - 299_000),
      body,
      secrets: [key],
    })
    expect(verifyWebhook(key, body, recent, { now })).toEqual(event)
    // Without `now`, the clock: a delivery signed just now passes.
    const fresh = webhookHeaders({ eventId: 'evt_9', timestamp: new Date(), body, secrets: [key] })
    expect(verifyWebhook(key, body, fresh)).toEqual(event)
  })
})
