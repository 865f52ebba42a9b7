// Delivery signatures: what standardwebhooks verifies, and the algorithm spelled out with node:crypto.
import { createHmac } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { newWebhookSecret } from './secrets.js'
import { webhookHeaders } from './signing.js'

const body = JSON.stringify({ type: 'contact.created', timestamp: '2026-11-24T09:00:00.000Z', data: { object: {} } })

describe('webhookHeaders', () => {
  it('gives the Standard Webhooks headers, verifiable with the secret', () => {
    const secret = newWebhookSecret()
    const headers = webhookHeaders({ eventId: 'evt_1', timestamp: new Date(), body, secrets: [secret] })
    expect(headers).toMatchObject({ 'webhook-id': 'evt_1', 'content-type': 'application/json' })
    expect(headers['webhook-timestamp']).toMatch(/^\d{10}$/)
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
  })

  it('during a roll signs with both secrets: either verifies, a third does not', () => {
    const [oldSecret, newSecret] = [newWebhookSecret(), newWebhookSecret()]
    const headers = webhookHeaders({ eventId: 'evt_2', timestamp: new Date(), body, secrets: [newSecret, oldSecret] })
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2)
    expect(() => new Webhook(oldSecret).verify(body, headers)).not.toThrow()
    expect(() => new Webhook(newSecret).verify(body, headers)).not.toThrow()
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow(/No matching signature/)
  })

  it('a changed body or id does not verify', () => {
    const secret = newWebhookSecret()
    const headers = webhookHeaders({ eventId: 'evt_3', timestamp: new Date(), body, secrets: [secret] })
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow()
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'evt_4' })).toThrow()
  })

  it('matches HMAC-SHA-256 over "id.timestamp.body" keyed with the base64-decoded secret body', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
    const timestamp = new Date('2026-11-24T09:00:00.750Z')
    const headers = webhookHeaders({ eventId: 'evt_5', timestamp, body, secrets: [secret] })
    const seconds = Math.floor(timestamp.getTime() / 1000)
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
    const expected = createHmac('sha256', key).update(`evt_5.${seconds}.${body}`).digest('base64')
    expect(headers['webhook-timestamp']).toBe(String(seconds))
    expect(headers['webhook-signature']).toBe(`v1,${expected}`)
  })

  it('refuses to sign with no secret', () => {
    expect(() => webhookHeaders({ eventId: 'evt_6', timestamp: new Date(), body, secrets: [] })).toThrow()
  })
})
