// Public ids: a type prefix and a ULID body (48-bit ms time + 80 random bits, Crockford base32),
// so sorting by id is creation order and inserts stay at the right edge of the index.
import { randomFillSync } from 'node:crypto'

const ID_PREFIXES = {
  account: 'acct',
  apiKey: 'key',
  auditEntry: 'aud',
  contact: 'con',
  contactImport: 'imp',
  event: 'evt',
  invitation: 'inv',
  webhookEndpoint: 'we',
  webhookDelivery: 'wd',
  request: 'req',
  user: 'usr',
} as const
export type IdKind = keyof typeof ID_PREFIXES

const BASE32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
/** A base32 digit's value by its character code; -1 for any other character, as indexOf gives. */
const DIGIT_OF_CODE = Int8Array.from({ length: 128 }, (_, code) => BASE32.indexOf(String.fromCharCode(code)))
/**
 * Each kind's last time and random part, as the two 40-bit halves idString writes: a kind's ids are
 * made at its own callers' times.
 */
const last = new Map<IdKind, { time: number; high: number; low: number }>()

/** Half of a ULID's random part: 40 bits, 8 base32 digits. */
const HALF = 2 ** 40

/**
 * Monotonic per kind within this process: ids of one millisecond add a random step to the random
 * part, so they sort in creation order but one id does not give away the next (Request-Id is
 * public). Per kind, so ids made at a given time (an audit entry at the clock's now) never carry
 * another kind's ids, such as request ids, whose time the request log reads, forward.
 */
export function newId(kind: IdKind, now = Date.now()): string {
  let state = last.get(kind)
  if (!state) {
    state = { time: -1, high: 0, low: 0 }
    last.set(kind, state)
  }
  if (now <= state.time) {
    // The step carried from the low half into the high one. Overflowing 80 bits needs about 2^48
    // ids in one millisecond: it cannot happen.
    state.low += randomStep()
    if (state.low >= HALF) {
      state.low -= HALF
      state.high += 1
    }
  } else {
    state.time = now
    state.high = randomPool.readUIntBE(drawRandom(5), 5)
    state.low = randomPool.readUIntBE(drawRandom(5), 5)
  }
  return idString(kind, state.time, state.high, state.low)
}

/** The pattern of a well-formed id of this kind (used by route schemas). */
export const idPattern = (kind: IdKind): string => `^${ID_PREFIXES[kind]}_[0-9A-HJKMNP-TV-Z]{26}$`

/** The length of every id of this kind: the prefix, `_` and the 26 characters of the ULID. */
export const idLength = (kind: IdKind): number => ID_PREFIXES[kind].length + 27

/** The last millisecond a ULID's 48-bit time can hold (the year 10889): times beyond are read as it. */
const MAX_TIME = 2 ** 48 - 1

/** When an id was made: the milliseconds its ULID's time part holds. */
export function timeOfId(id: string): number {
  // By char code, without a slice: the request log reads the time of every request's id.
  const start = id.indexOf('_') + 1
  return digitsValue(id, start, Math.min(10, id.length - start))
}

/**
 * The smallest id of this kind made at `ms` or later: every id made before `ms` sorts below it, so
 * a time range becomes a range of ids. A time before 1970 is read as 1970: no id is older.
 */
export const firstIdAt = (kind: IdKind, ms: number): string => idString(kind, Math.min(Math.max(ms, 0), MAX_TIME), 0, 0)

/** The numbers an id's ULID is held as: its time, then its random part's high and low 40 bits. */
export const ULID_PARTS = 3

/**
 * Writes the ULID of an id made by newId as ULID_PARTS numbers at `into[at]`: a store of many ids
 * holds numbers instead of strings the garbage collector has to move and promote (the request
 * log's open chunks, request-log-chunk.ts). idOfParts makes the same id again.
 */
export function writeUlidParts(id: string, into: Float64Array, at: number): void {
  const start = id.length - 26
  into[at] = digitsValue(id, start, 10)
  into[at + 1] = digitsValue(id, start + 10, 8)
  into[at + 2] = digitsValue(id, start + 18, 8)
}

/** The value of `count` base32 digits of `id` from `from`. */
function digitsValue(id: string, from: number, count: number): number {
  let value = 0
  for (let at = from; at < from + count; at++) {
    value = value * 32 + (DIGIT_OF_CODE[id.charCodeAt(at)] ?? -1)
  }
  return value
}

/** The id of this kind whose ULID writeUlidParts wrote at `from[at]`. */
export const idOfParts = (kind: IdKind, from: Float64Array, at: number): string =>
  idString(kind, from[at] as number, from[at + 1] as number, from[at + 2] as number)

const CODE_OF_DIGIT = Array.from(BASE32, (digit) => digit.charCodeAt(0))
/** Each kind's `prefix_` as character codes, with room for the ULID after it. */
const ID_CODES = new Map(
  Object.entries(ID_PREFIXES).map(([kind, prefix]) => [
    kind,
    Array.from(`${prefix}_${'0'.repeat(26)}`, (c) => c.charCodeAt(0)),
  ]),
)

/**
 * An id from its ULID's numbers, made in one piece: a string built by `+` is a tree of parts that
 * every character read (timeOfId, the request log's writeUlidParts) and every write walks.
 */
function idString(kind: IdKind, time: number, high: number, low: number): string {
  const codes = ID_CODES.get(kind) as number[]
  const ulid = codes.length - 26
  writeDigits(codes, ulid, 10, time)
  writeDigits(codes, ulid + 10, 8, high)
  writeDigits(codes, ulid + 18, 8, low)
  return String.fromCharCode(...codes)
}

function writeDigits(codes: number[], from: number, count: number, value: number): void {
  // Five digits (25 bits) at a time in integer arithmetic: the value itself may be past 2^32.
  let rest = value
  let at = from + count - 1
  while (at >= from) {
    const block = rest % 2 ** 25
    rest = (rest - block) / 2 ** 25
    let bits = block
    for (let digit = 0; digit < 5 && at >= from; digit++, at--) {
      codes[at] = CODE_OF_DIGIT[bits & 31] as number
      bits >>>= 5
    }
  }
}

/** Random bytes drawn in blocks: one call into the system's generator per 4 KiB, not one per id. */
const randomPool = Buffer.alloc(4096)
let randomOffset = randomPool.length

/** Where the next `bytes` unused random bytes are in randomPool. */
function drawRandom(bytes: number): number {
  if (randomOffset + bytes > randomPool.length) {
    randomFillSync(randomPool)
    randomOffset = 0
  }
  randomOffset += bytes
  return randomOffset - bytes
}

const randomStep = (): number => randomPool.readUInt32BE(drawRandom(4)) + 1
