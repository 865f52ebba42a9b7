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
  /** The person who created it (in the web app); null for a key made on the command line. */
  created_by_user_id: string | null
  /** When a leaked-key report first named it, and where it was found (a URL, or '' when none was given). */
  exposed_at: string | null
  exposed_url: string | null
}

/** Requests per key per UTC day, for the usage chart. */
export interface ApiKeyUsageTable {
  account_id: string
  key_id: string
  /** YYYY-MM-DD (UTC). */
  day: string
  requests: number
}
