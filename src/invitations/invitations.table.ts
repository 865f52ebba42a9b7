import type { Role } from '../users/users.table.js'

/** An invitation to join an account; its link's token is stored only as a digest. */
export interface InvitationsTable {
  account_id: string
  id: string
  /** As the owner typed it, shown in the list; `email_lower` is what acceptance compares. */
  email: string
  email_lower: string
  role: Exclude<Role, 'owner'>
  /** SHA-256 of the link's token. */
  token_hash: string
  invited_by: string
  /** SHA-256 of the inviting client's address (IPv6: its /64), for the per-address throttle. */
  client_key_hash: string
  created_at: string
  expires_at: string
  accepted_at: string | null
  accepted_by: string | null
  revoked_at: string | null
}
