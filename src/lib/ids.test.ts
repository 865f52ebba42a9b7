import { describe, expect, it } from 'vitest'
import { firstIdAt, idOfParts, idPattern, newId, timeOfId, ULID_PARTS, writeUlidParts } from './ids.js'

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

describe('writeUlidParts and idOfParts', () => {
  it('hold an id as numbers that make the same id again, and sort as the ids do', () => {
    const ids = [
      firstIdAt('request', 0),
      firstIdAt('request', 2 ** 48 - 1),
      'req_7ZZZZZZZZZZZZZZZZZZZZZZZZZ',
      'req_01M8KQTN7RE5ZWEVNFWH70R1NX',
      'req_01M8KQTN7RE5ZWEVNFWH70R1NW',
      ...Array.from({ length: 200 }, () => newId('request')),
    ]
    const parts = new Float64Array(ids.length * ULID_PARTS)
    for (const [at, id] of ids.entries()) {
      writeUlidParts(id, parts, at * ULID_PARTS)
    }
    expect(ids.map((_, at) => idOfParts('request', parts, at * ULID_PARTS))).toEqual(ids)
    const byParts = (a: number, b: number): number => {
      for (let part = 0; part < ULID_PARTS; part++) {
        const difference = (parts[a * ULID_PARTS + part] as number) - (parts[b * ULID_PARTS + part] as number)
        if (difference !== 0) {
          return difference
        }
      }
      return 0
    }
    const sortedByParts = ids.map((_, at) => at).sort(byParts)
    expect(sortedByParts.map((at) => ids[at])).toEqual([...ids].sort())
  })
})
