// Small crypto helpers over node:crypto.
import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'

export const sha256Hex = (text: string): string => createHash('sha256').update(text).digest('hex')

export const hmacSha256 = (secret: string, text: string): Buffer => createHmac('sha256', secret).update(text).digest()

/**
 * A 32-byte key for one purpose, derived from the app's SECRET with HKDF-SHA-256: the same SECRET gives
 * the same key on every instance, and the purpose label keeps keys for different uses apart.
 */
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
