// Pins normalizePhone's shortcut for North American numbers in E.164 (contacts.ts): on a corpus of
// such numbers and of near misses, it answers exactly what libphonenumber-js answers.
import { parsePhoneNumberFromString } from 'libphonenumber-js/max'
import { describe, expect, it } from 'vitest'
import { normalizePhone } from './contacts.js'

/** normalizePhone as it was, libphonenumber alone: the reference. */
const reference = (raw: string): string | undefined => {
  const parsed = parsePhoneNumberFromString(raw.trim())
  return parsed?.isPossible() && !parsed.ext ? parsed.number : undefined
}

/** A deterministic pseudo-random digit string (the corpus is the same on every run). */
let seed = 15
const digits = (length: number) =>
  Array.from({ length }, () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
    return String(seed % 10)
  }).join('')

describe('normalizePhone', () => {
  it('answers North American E.164 numbers as libphonenumber does: every area code, random subscribers', () => {
    const corpus: string[] = []
    for (let area = 200; area < 1000; area++) {
      for (const rest of ['0000000', '5550100', '9999999', '1234567', '9110000', digits(7), digits(7)]) {
        corpus.push(`+1${area}${rest}`)
      }
    }
    for (let i = 0; i < 20_000; i++) {
      corpus.push(`+1${2 + (i % 8)}${digits(9)}`)
    }
    const differing = corpus.filter((phone) => normalizePhone(phone) !== reference(phone))
    expect(differing).toEqual([])
  })

  it('answers the near misses as libphonenumber does: area codes 0 and 1, other lengths, spaces, other countries', () => {
    const corpus = [
      ...Array.from({ length: 200 }, (_, i) => `+1${i % 2}${digits(9)}`),
      ...Array.from({ length: 200 }, (_, i) => `+1${2 + (i % 8)}${digits(8 + (i % 2) * 2)}`),
      ...Array.from({ length: 100 }, () => ` +1415${digits(7)} `),
      ...Array.from({ length: 100 }, () => `+1 (415) ${digits(3)}-${digits(4)}`),
      ...Array.from({ length: 100 }, () => `+1415${digits(7)} ext. 12`),
      ...Array.from({ length: 100 }, (_, i) => `+${[44, 7, 33, 49, 61][i % 5]}${digits(9 + (i % 3))}`),
      '+1',
      '+12',
      '14155550100',
      '+1４155550100',
    ]
    const differing = corpus.filter((phone) => normalizePhone(phone) !== reference(phone))
    expect(differing).toEqual([])
  })
})
