import { describe, expect, it } from 'vitest'
import { eventPayload } from './payload.js'

describe('eventPayload', () => {
  it('is the event as a delivery sends it: type, timestamp (the event created_at), data', () => {
    const event = {
      object: 'event',
      id: 'evt_01JZ',
      type: 'contact.updated',
      created_at: '2026-11-24T10:00:00.000Z',
      livemode: false,
      data: { object: { id: 'con_1', note: ',"data":' } },
    }
    expect(JSON.parse(eventPayload(JSON.stringify(event)))).toEqual({
      type: 'contact.updated',
      timestamp: '2026-11-24T10:00:00.000Z',
      livemode: false,
      data: { object: { id: 'con_1', note: ',"data":' } },
    })
  })

  it('refuses a body in another form rather than send something else', () => {
    expect(() => eventPayload('{"type":"contact.created"}')).toThrow(/not in the form/)
  })
})
