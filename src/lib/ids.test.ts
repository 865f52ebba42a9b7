import { describe, expect, it } from 'vitest'
import { firstIdAt, idPattern, newId, timeOfId } from './ids.js'

const BASE32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
/** The 80-bit random part of an id, as a number. */
const randomPart = (id: string): bigint =>
  [...id.slice(-16)].reduce((value, char) => value * 32n + BigInt(BASE32.indexOf(char)), 0n)

describe('newId', () => {
  it('is a prefixed ULID of its kind', () => {
    expect(newId('contact')).toMatch(new RegExp(idPattern('contact')))
    expect(newId('request')).toMatch(new RegExp(idPattern('request')))
  })

  it('a kind made at a future time leaves the next request id at the present', () => {
    newId('auditEntry', Date.now() + 86_400_000)
    const before = Date.now()
    const id = newId('request')
    expect(timeOfId(id)).toBeGreaterThanOrEqual(before)
    expect(timeOfId(id)).toBeLessThanOrEqual(Date.now())
  })

  it('ids of one millisecond sort in creation order, with unpredictable steps between them', () => {
    // A millisecond no other test used, of a kind no suite's time filters read (not request ids).
    const now = Date.now() + 10_000
    const ids = Array.from({ length: 2000 }, () => newId('invitation', now))
    const bodies = ids.map((id) => id.slice(id.indexOf('_') + 1))
    expect([...bodies].sort()).toEqual(bodies)
    expect(new Set(bodies).size).toBe(bodies.length)
    const steps = bodies.slice(1).map((body, i) => randomPart(body) - randomPart(bodies[i] as string))
    expect(steps.every((step) => step >= 1n && step <= 2n ** 32n)).toBe(true)
    // A +1 counter would make every step 1; random steps of up to 2^32 are almost never below 2^16.
    expect(steps.filter((step) => step < 2n ** 16n).length).toBeLessThan(5)
  })
})

describe('timeOfId', () => {
  it('reads back the time of an id of any kind, from 1970 to the last time a ULID holds', () => {
    for (const ms of [0, 1, 1_796_000_000_123, 2 ** 48 - 1]) {
      expect(timeOfId(firstIdAt('request', ms))).toBe(ms)
      expect(timeOfId(firstIdAt('webhookDelivery', ms))).toBe(ms)
    }
  })
})
