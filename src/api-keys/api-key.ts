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

/** The word after the prefix: which mode's data a key acts on (docs/design.md#test-mode). */
const modeWord = (livemode: boolean) => (livemode ? 'live' : 'test')

export const generateApiKey = (prefix: string, livemode: boolean): string =>
  `${prefix}_${modeWord(livemode)}_${randomAlphanumeric(KEY_RANDOM_LENGTH)}`

/** A plain SHA-256 is enough, and survives a rotation of SECRET (docs/design.md#authentication). */
export const hashApiKey = (key: string): string => sha256Hex(key)

/** What lists show instead of the key: `service_live_…` (or `service_test_…`) and its last four characters. */
export const redactApiKey = (prefix: string, last4: string, livemode: boolean): string =>
  `${prefix}_${modeWord(livemode)}_…${last4}`

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

/**
 * A key of either mode as regular-expression source, unanchored and without capturing groups: the
 * header check below and `contacts-api scan` (key-scan.ts, which docs/key-safety.md gives to gitleaks).
 */
export const apiKeySource = (prefix: string): string =>
  `${prefix}_(?:${modeWord(true)}|${modeWord(false)})_[A-Za-z0-9]{${KEY_RANDOM_LENGTH}}`

/** A whole string that is a key of either mode. */
export const apiKeyPattern = (prefix: string): RegExp => new RegExp(`^${apiKeySource(prefix)}$`)

/** Whether a well-formed key (apiKeyPattern) is a live one: its mode word. */
export const isLiveKey = (key: string, prefix: string): boolean => key.startsWith(`${prefix}_live_`)
