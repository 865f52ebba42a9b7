// Webhook secrets: the whsec_ form, and encryption at rest that fails loudly on any change.
import { describe, expect, it } from 'vitest'
import { decryptSecret, encryptSecret, newWebhookSecret, webhookSecretKey } from './secrets.js'

const APP_SECRET = 'a'.repeat(32)
const key = webhookSecretKey(APP_SECRET)

describe('newWebhookSecret', () => {
  it('is whsec_ + base64 of 32 random bytes', () => {
    const secret = newWebhookSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32)
    expect(newWebhookSecret()).not.toBe(secret)
  })
})

describe('webhookSecretKey', () => {
  it('is 32 bytes, the same for the same SECRET, different for another SECRET', () => {
    expect(key).toHaveLength(32)
    expect(webhookSecretKey(APP_SECRET).equals(key)).toBe(true)
    expect(webhookSecretKey('b'.repeat(32)).equals(key)).toBe(false)
  })
})

describe('encryptSecret / decryptSecret', () => {
  const secret = newWebhookSecret()
  const body = secret.slice('whsec_'.length)

  it('round-trips', () => {
    expect(decryptSecret(encryptSecret(secret, key), key)).toBe(secret)
  })

  it('has the v1 text form and never contains the secret or its base64 body', () => {
    const stored = encryptSecret(secret, key)
    expect(stored).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/)
    expect(stored).not.toContain(secret)
    expect(stored).not.toContain(body)
    expect(stored).not.toContain(Buffer.from(body, 'base64').toString('base64url'))
  })

  it('gives a different text each time (random nonce)', () => {
    expect(encryptSecret(secret, key)).not.toBe(encryptSecret(secret, key))
  })

  it('throws on a wrong key', () => {
    expect(() => decryptSecret(encryptSecret(secret, key), webhookSecretKey('b'.repeat(32)))).toThrow(
      /could not be decrypted/,
    )
  })

  it('throws on any altered byte of nonce, ciphertext or tag', () => {
    const [version, nonce, sealed] = encryptSecret(secret, key).split('.') as [string, string, string]
    const flip = (text: string, index: number): string => {
      const bytes = Buffer.from(text, 'base64url')
      bytes[index] = (bytes[index] ?? 0) ^ 1
      return bytes.toString('base64url')
    }
    const sealedLength = Buffer.from(sealed, 'base64url').length
    for (const altered of [
      `${version}.${flip(nonce, 0)}.${sealed}`,
      `${version}.${nonce}.${flip(sealed, 0)}`,
      `${version}.${nonce}.${flip(sealed, sealedLength - 1)}`,
    ]) {
      expect(() => decryptSecret(altered, key)).toThrow(/could not be decrypted/)
    }
  })

  it.each([
    '',
    'v2.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    'v1.AAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    'v1.AAAAAAAAAAAAAAAA.AAAA',
    'v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.x',
    'v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAA*AAAAAAAAAA',
  ])('throws on malformed text %j', (text) => {
    expect(() => decryptSecret(text, key)).toThrow(/v1 format/)
  })

  it('throws on a truncated ciphertext', () => {
    const stored = encryptSecret(secret, key)
    expect(() => decryptSecret(stored.slice(0, -4), key)).toThrow()
  })
})
