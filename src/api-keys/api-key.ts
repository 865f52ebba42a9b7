// The API key format: generate, parse from a header, digest, redact. Pure functions.
import { randomAlphanumeric, sha256Hex } from '../lib/crypto.js'

const KEY_RANDOM_LENGTH = 32
export type Scope = 'read' | 'write'
export const FULL_SCOPES: Scope[] = ['read', 'write']
export const READ_ONLY_SCOPES: Scope[] = ['read']

/**
 * The stored `scopes` column read back. It decides what a key may do, so anything but a list of
 * known scopes is refused loudly rather than trusted.
 */
export function parseStoredScopes(text: string): Scope[] {
  const value: unknown = JSON.parse(text)
  if (!Array.isArray(value) || !value.every((scope) => scope === 'read' || scope === 'write')) {
    throw new Error(`stored API key scopes are not a list of known scopes: ${text.slice(0, 100)}`)
  }
  return value
}

export const generateApiKey = (prefix: string): string => `${prefix}_live_${randomAlphanumeric(KEY_RANDOM_LENGTH)}`

/** A plain SHA-256 is enough, and survives a rotation of SECRET (docs/design.md#authentication). */
export const hashApiKey = (key: string): string => sha256Hex(key)

/** What lists show instead of the key: `service_live_…` and its last four characters. */
export const redactApiKey = (prefix: string, last4: string): string => `${prefix}_live_…${last4}`

export type ParsedAuthorization = { ok: true; key: string } | { ok: false }

/** Checks the header's shape before anything touches the database; the scheme is case-insensitive (RFC 9110). */
export function parseAuthorization(header: string | undefined, keyPattern: RegExp): ParsedAuthorization {
  if (header === undefined || header.length > 200) {
    return { ok: false }
  }
  const match = /^bearer +(\S+) *$/i.exec(header)
  const key = match?.[1]
  return key !== undefined && keyPattern.test(key) ? { ok: true, key } : { ok: false }
}

export const apiKeyPattern = (prefix: string): RegExp =>
  new RegExp(`^${prefix}_live_[A-Za-z0-9]{${KEY_RANDOM_LENGTH}}$`)
