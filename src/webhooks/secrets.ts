// Webhook signing secrets: generating them, and encrypting them at rest (AES-256-GCM under a key derived from SECRET).
import { randomBytes } from 'node:crypto'
import { deriveKey, seal, unseal } from '../lib/crypto.js'

const SECRET_PREFIX = 'whsec_'
// The HKDF purpose label: a key derived for anything else from the same SECRET is unrelated to this one.
const ENCRYPTION_PURPOSE = 'webhook-secret-encryption'

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks form). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

/** The key that encrypts webhook secrets, derived from the app's SECRET. */
export function webhookSecretKey(appSecret: string): Buffer {
  return deriveKey(appSecret, ENCRYPTION_PURPOSE)
}

/** Encrypts a signing secret for storage (lib/crypto.ts seal: `v1.<nonce>.<ciphertext+tag>`). */
export const encryptSecret = (secret: string, key: Buffer): string => seal(secret, key)

/** Decrypts what encryptSecret stored. Throws when the text is malformed, altered or sealed under another key. */
export const decryptSecret = (ciphertext: string, key: Buffer): string => unseal(ciphertext, key)
