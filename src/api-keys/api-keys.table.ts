export interface ApiKeysTable {
  account_id: string
  id: string
  name: string
  /** SHA-256 hex of the full key; the key itself is never stored. */
  key_hash: string
  last4: string
  /** JSON array, e.g. ["read","write"]. */
  scopes: string
  created_at: string
  expires_at: string | null
  revoked_at: string | null
  last_used_at: string | null
}
