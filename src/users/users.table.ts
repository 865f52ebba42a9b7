export interface UsersTable {
  id: string
  email: string
  email_lower: string
  /** argon2id, PHC string. */
  password_hash: string
  created_at: string
}

/** What each may do: users/roles.ts (docs/design.md#web-application). */
export type Role = 'owner' | 'admin' | 'member'

export interface MembershipsTable {
  account_id: string
  user_id: string
  role: Role
  created_at: string
}

export interface SessionsTable {
  /** SHA-256 of the cookie's token; the token itself is never stored. */
  token_hash: string
  user_id: string
  created_at: string
  expires_at: string
  /** Updated at most once a minute (sessions.store.ts), for the sessions page. */
  last_seen_at: string | null
  /** The browser's User-Agent when the session was last seen, cut to 300 characters. */
  user_agent: string | null
}

/** A failed sign-in, counted against its key for the sign-in throttle (src/rate-limit/sign-in-throttle.ts). */
export interface SignInFailuresTable {
  /** Random: two failures of one key in one millisecond are two rows. */
  id: string
  /** SHA-256 of the throttled key (`email:…` or `ip:…`): the emails people typed are not kept. */
  key: string
  at: string
}
