export interface AuditLogTable {
  account_id: string
  id: string
  at: string
  /** Who did it: a person's user id, or null for the command line (the operator). */
  actor_user_id: string | null
  /** e.g. `api_key.created`; see AuditAction. */
  action: string
  /** The object acted on, e.g. the key's id. */
  target_id: string
  /** What else is worth knowing (name, scopes, expiry), as a JSON object. */
  detail: string
  /** The client address of a web action; null from the command line. */
  ip: string | null
}
