// Public ids: a type prefix and a ULID body (48-bit ms time + 80 random bits, Crockford base32),
// so sorting by id is creation order and inserts stay at the right edge of the index.
import { randomBytes, randomFillSync } from 'node:crypto'

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
let lastTime = -1
const lastRandom = new Uint8Array(10)

/**
 * Monotonic within this process: ids of one millisecond add a random step to the random part, so
 * they sort in creation order but one id does not give away the next (Request-Id is public).
 */
export function newId(kind: IdKind, now = Date.now()): string {
  if (now <= lastTime) {
    addToRandom(randomStep())
  } else {
    lastTime = now
    lastRandom.set(randomBytes(10))
  }
  return `${ID_PREFIXES[kind]}_${encodeTime(lastTime)}${encodeRandom(lastRandom)}`
}

/** The pattern of a well-formed id of this kind (used by route schemas). */
export const idPattern = (kind: IdKind): string => `^${ID_PREFIXES[kind]}_[0-9A-HJKMNP-TV-Z]{26}$`

/** The length of every id of this kind: the prefix, `_` and the 26 characters of the ULID. */
export const idLength = (kind: IdKind): number => ID_PREFIXES[kind].length + 27

/** Random bytes drawn in blocks: one system call per 1,024 steps, not one per id. */
const stepPool = Buffer.alloc(4096)
let stepOffset = stepPool.length

function randomStep(): number {
  if (stepOffset + 4 > stepPool.length) {
    randomFillSync(stepPool)
    stepOffset = 0
  }
  const step = stepPool.readUInt32BE(stepOffset) + 1
  stepOffset += 4
  return step
}

function addToRandom(step: number): void {
  let carry = step
  for (let i = lastRandom.length - 1; i >= 0 && carry > 0; i--) {
    const sum = (lastRandom[i] ?? 0) + (carry % 256)
    lastRandom[i] = sum % 256
    carry = Math.floor(carry / 256) + Math.floor(sum / 256)
  }
  // Overflowing 80 bits needs about 2^48 ids in one millisecond: it cannot happen.
}

function encodeTime(ms: number): string {
  let out = ''
  let rest = ms
  for (let i = 0; i < 10; i++) {
    out = BASE32[rest % 32] + out
    rest = Math.floor(rest / 32)
  }
  return out
}

function encodeRandom(bytes: Uint8Array): string {
  // 80 bits → 16 base32 characters, 5 bits at a time.
  let out = ''
  let buffer = 0
  let bits = 0
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32[(buffer >> (bits - 5)) & 31]
      bits -= 5
    }
    buffer &= (1 << bits) - 1
  }
  return out
}
