// Small crypto helpers over node:crypto.
import { createCipheriv, createDecipheriv, createHmac, hash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'

// One native call, no Hash object to build and collect: the API key's digest on every request
// (docs/performance.md, round 3).
export const sha256Hex = (text: string): string => hash('sha256', text, 'hex')

export const hmacSha256 = (secret: string, text: string): Buffer => createHmac('sha256', secret).update(text).digest()

/** A 32-byte key for one purpose, derived from SECRET (HKDF-SHA-256): the same on every instance. */
export const deriveKey = (secret: string, purpose: string): Buffer =>
  Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), purpose, 32))

export function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
// 248 = 4 × 62: bytes at or above it are dropped so every character is equally likely.
const UNBIASED_LIMIT = 248

/** `length` characters from [A-Za-z0-9], from a CSPRNG, without modulo bias. */
export function randomAlphanumeric(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < UNBIASED_LIMIT) {
        out += ALPHANUMERIC[byte % 62]
        if (out.length === length) {
          break
        }
      }
    }
  }
  return out
}

const FORMAT_VERSION = 'v1'
// 96-bit random nonces: GCM's native size. Collisions become a concern only after ~2^32 encryptions under
// one key; what is sealed here is sealed once per create or roll of a secret.
const NONCE_BYTES = 12
const TAG_BYTES = 16
const BASE64URL = /^[A-Za-z0-9_-]+$/

/** Encrypts text at rest with AES-256-GCM: `v1.<base64url nonce>.<base64url ciphertext+tag>`. */
export function seal(secret: string, key: Buffer): string {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES })
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `${FORMAT_VERSION}.${nonce.toString('base64url')}.${sealed.toString('base64url')}`
}

/** Decrypts what seal wrote. Throws when the text is malformed, altered or sealed under another key. */
export function unseal(ciphertext: string, key: Buffer): string {
  const [version, nonceText, sealedText, ...rest] = ciphertext.split('.')
  // Buffer.from(…, 'base64url') skips characters it does not know, so the alphabet is checked first.
  if (
    version !== FORMAT_VERSION ||
    rest.length > 0 ||
    !BASE64URL.test(nonceText ?? '') ||
    !BASE64URL.test(sealedText ?? '')
  ) {
    throw new Error('Sealed text is not in the v1 format')
  }
  const nonce = Buffer.from(nonceText ?? '', 'base64url')
  const sealed = Buffer.from(sealedText ?? '', 'base64url')
  if (nonce.length !== NONCE_BYTES || sealed.length <= TAG_BYTES) {
    throw new Error('Sealed text is not in the v1 format')
  }
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES })
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
  try {
    return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    )
  } catch {
    // GCM's tag check failed: the stored text was altered, or the key (SECRET) is not the one it was sealed with.
    throw new Error('Sealed text could not be decrypted (altered, or SECRET changed)')
  }
}
