export interface IdempotencyKeysTable {
  account_id: string
  key: string
  /** SHA-256 of method, path and body: the same key with another request is refused. */
  request_hash: string
  /** The first response's status; null while that request is in flight. */
  status: number | null
  body: string | null
  location: string | null
  created_at: string
  expires_at: string
}
