// Webhook signing secrets: generating them, and encrypting them at rest (AES-256-GCM under a key derived from SECRET).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { deriveKey } from '../lib/crypto.js'

const SECRET_PREFIX = 'whsec_'
// The HKDF purpose label: a key derived for anything else from the same SECRET is unrelated to this one.
const ENCRYPTION_PURPOSE = 'webhook-secret-encryption'
const FORMAT_VERSION = 'v1'
// 96-bit random nonces: GCM's native size. Collisions become a concern only after ~2^32 encryptions under
// one key, and secrets are encrypted once per create or roll.
const NONCE_BYTES = 12
const TAG_BYTES = 16
const BASE64URL = /^[A-Za-z0-9_-]+$/

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks form). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

/** The key that encrypts webhook secrets, derived from the app's SECRET. */
export function webhookSecretKey(appSecret: string): Buffer {
  return deriveKey(appSecret, ENCRYPTION_PURPOSE)
}

/** Encrypts a signing secret for storage: `v1.<base64url nonce>.<base64url ciphertext+tag>`. */
export function encryptSecret(secret: string, key: Buffer): string {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES })
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `${FORMAT_VERSION}.${nonce.toString('base64url')}.${sealed.toString('base64url')}`
}

/** Decrypts what encryptSecret stored. Throws when the text is malformed, altered or sealed under another key. */
export function decryptSecret(ciphertext: string, key: Buffer): string {
  const [version, nonceText, sealedText, ...rest] = ciphertext.split('.')
  // Buffer.from(…, 'base64url') skips characters it does not know, so the alphabet is checked first.
  if (
    version !== FORMAT_VERSION ||
    rest.length > 0 ||
    !BASE64URL.test(nonceText ?? '') ||
    !BASE64URL.test(sealedText ?? '')
  ) {
    throw new Error('Encrypted webhook secret is not in the v1 format')
  }
  const nonce = Buffer.from(nonceText ?? '', 'base64url')
  const sealed = Buffer.from(sealedText ?? '', 'base64url')
  if (nonce.length !== NONCE_BYTES || sealed.length <= TAG_BYTES) {
    throw new Error('Encrypted webhook secret is not in the v1 format')
  }
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES })
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
  try {
    return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    )
  } catch {
    // GCM's tag check failed: the stored text was altered, or the key (SECRET) is not the one it was sealed with.
    throw new Error('Encrypted webhook secret could not be decrypted (altered, or SECRET changed)')
  }
}
