// Leaked-key reports in GitHub's secret-scanning partner format (docs/key-safety.md): a JSON array
// of the tokens found, signed with ECDSA P-256 by a key GitHub publishes; the answer labels each
// token. Only the signature makes a report believable: the route takes no API key.
import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import { type Static, Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

/** SECRET_SCANNING_PUBLIC_KEYS, read: the verification keys by identifier. */
export type ScanningKeys = ReadonlyMap<string, KeyObject>

const PublicKeysFile = Type.Object({
  public_keys: Type.Array(
    Type.Object({ key_identifier: Type.String({ minLength: 1 }), key: Type.String({ minLength: 1 }) }),
    { minItems: 1 },
  ),
})

/** Parses the file GitHub publishes (`{public_keys: [{key_identifier, key, is_current}]}`); throws on anything else. */
export function parseScanningKeys(text: string): ScanningKeys {
  const parsed: unknown = JSON.parse(text)
  if (!Value.Check(PublicKeysFile, parsed)) {
    throw new Error('expected {"public_keys": [{"key_identifier": "…", "key": "-----BEGIN PUBLIC KEY-----…"}]}')
  }
  const keys = new Map<string, KeyObject>()
  for (const { key_identifier: id, key } of parsed.public_keys) {
    if (keys.has(id)) {
      throw new Error(`key identifier ${id} appears twice`)
    }
    // createPublicKey would take a private key too (deriving its public half): such a file is a leak.
    if (!key.includes('-----BEGIN PUBLIC KEY-----')) {
      throw new Error(`key ${id} is not a PEM public key (-----BEGIN PUBLIC KEY-----)`)
    }
    let object: KeyObject
    try {
      object = createPublicKey(key)
    } catch (error) {
      throw new Error(`key ${id} cannot be read: ${(error as Error).message}`)
    }
    if (object.asymmetricKeyType !== 'ec' || object.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
      throw new Error(`key ${id} is not an ECDSA P-256 public key`)
    }
    keys.set(id, object)
  }
  return keys
}

/** True when `signature` (base64, DER) is the named key's ECDSA-SHA256 signature of these exact bytes. */
export function isSignedReport(
  keys: ScanningKeys,
  keyId: string | undefined,
  signature: string | undefined,
  body: Buffer,
): boolean {
  const key = keyId === undefined ? undefined : keys.get(keyId)
  if (key === undefined || signature === undefined || signature === '') {
    return false
  }
  try {
    return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'))
  } catch {
    return false
  }
}

/** The most tokens one report may carry (GitHub sends a few at a time); its bytes: the API's body limit. */
export const REPORT_MAX_TOKENS = 1000

// No length limits per field: one long URL must not make GitHub's whole report fail (the API's
// body limit bounds them); what is stored is cut to EXPOSED_URL_MAX.
const ReportedToken = Type.Object(
  {
    token: Type.String(),
    type: Type.String(),
    url: Type.Optional(Type.String()),
    source: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
)

/** The most characters of a reported URL kept (audit entry, banner). */
export const EXPOSED_URL_MAX = 2048
export const Report = Type.Array(ReportedToken, { maxItems: REPORT_MAX_TOKENS })
export type Report = Static<typeof Report>

/** What GitHub's protocol asks for each token: its SHA-256 (hex), its type, and whether it is real. */
export interface TokenLabel {
  token_hash: string
  token_type: string
  label: 'true_positive' | 'false_positive'
}
