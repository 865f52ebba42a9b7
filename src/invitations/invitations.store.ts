// Invitations to join an account (docs/web-app.md): a single-use link whose token is stored only as a
// digest, accepted only by a signed-in person with the invited email. The tenant is an argument of
// every function but the link's lookup.
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { type Db, inTransaction } from '../db/transaction.js'
import { sha256Hex } from '../lib/crypto.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import { secondsUntilOneLeaves } from '../rate-limit/sliding-window.js'
import type { User } from '../users/users.store.js'
import type { InvitationsTable } from './invitations.table.js'

export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000
/** Invitations an account may send, and a client address may send across accounts, in any hour. */
export const INVITATIONS_PER_HOUR = 20
const HOUR_MS = 3600 * 1000

export type InvitedRole = InvitationsTable['role']

export type Invitation = Omit<InvitationsTable, 'token_hash' | 'client_key_hash' | 'email_lower'>

const PUBLIC_COLUMNS = [
  'account_id',
  'id',
  'email',
  'role',
  'invited_by',
  'created_at',
  'expires_at',
  'accepted_at',
  'accepted_by',
  'revoked_at',
] as const

const tokenDigest = (token: string): string => sha256Hex(`invitation:${token}`)
const clientDigest = (clientKey: string): string => sha256Hex(`invitation-client:${clientKey}`)

/** Stores an invitation and returns its token (never stored); only the newest link to an email works. */
export async function createInvitation(
  db: Kysely<Database>,
  accountId: string,
  input: { email: string; role: InvitedRole; invitedBy: string; clientKey: string; now: Date },
): Promise<{ invitation: Invitation; token: string }> {
  const token = randomBytes(32).toString('base64url')
  const row: InvitationsTable = {
    account_id: accountId,
    id: newId('invitation', input.now.getTime()),
    email: input.email,
    email_lower: emailKey(input.email),
    role: input.role,
    token_hash: tokenDigest(token),
    invited_by: input.invitedBy,
    client_key_hash: clientDigest(input.clientKey),
    created_at: input.now.toISOString(),
    expires_at: new Date(input.now.getTime() + INVITATION_TTL_MS).toISOString(),
    accepted_at: null,
    accepted_by: null,
    revoked_at: null,
  }
  await inTransaction(db, async (trx) => {
    await pending(trx, accountId, input.now)
      .where('email_lower', '=', row.email_lower)
      .set({ revoked_at: input.now.toISOString() })
      .execute()
    await trx.insertInto('invitations').values(row).execute()
  })
  const { token_hash: _t, client_key_hash: _c, email_lower: _e, ...invitation } = row
  return { invitation, token }
}

const pending = (db: Db, accountId: string, now: Date) =>
  db
    .updateTable('invitations')
    .where('account_id', '=', accountId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now.toISOString())

export async function listPendingInvitations(db: Db, accountId: string, now: Date): Promise<Invitation[]> {
  return db
    .selectFrom('invitations')
    .select(PUBLIC_COLUMNS)
    .where('account_id', '=', accountId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now.toISOString())
    .orderBy('id', 'desc')
    .execute()
}

/** Revokes a pending invitation; false when there is none of that id (used, revoked or expired). */
export async function revokeInvitation(db: Db, accountId: string, id: string, now: Date): Promise<boolean> {
  const result = await pending(db, accountId, now)
    .where('id', '=', id)
    .set({ revoked_at: now.toISOString() })
    .executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

/** Revokes every pending invitation of this email to the account (a member removed cannot walk back in). */
export async function revokeInvitationsOf(db: Db, accountId: string, email: string, now: Date): Promise<number> {
  const result = await pending(db, accountId, now)
    .where('email_lower', '=', emailKey(email))
    .set({ revoked_at: now.toISOString() })
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/**
 * Seconds before one more invitation may be sent from this account and this client address; 0 when
 * it may now. The invitations, revoked ones included, are the count, the same on every instance.
 */
export async function invitationRetryAfter(db: Db, accountId: string, clientKey: string, now: Date): Promise<number> {
  const window = { max: INVITATIONS_PER_HOUR, windowMs: HOUR_MS }
  const since = new Date(now.getTime() - HOUR_MS).toISOString()
  const newest = (column: 'account_id' | 'client_key_hash', value: string) =>
    db
      .selectFrom('invitations')
      .select('created_at')
      .where(column, '=', value)
      .where('created_at', '>', since)
      .orderBy('created_at', 'desc')
      .limit(INVITATIONS_PER_HOUR)
      .execute()
  const [byAccount, byClient] = await Promise.all([
    newest('account_id', accountId),
    newest('client_key_hash', clientDigest(clientKey)),
  ])
  return Math.max(
    secondsUntilOneLeaves(
      byAccount.map((r) => r.created_at),
      window,
      now,
    ),
    secondsUntilOneLeaves(
      byClient.map((r) => r.created_at),
      window,
      now,
    ),
  )
}

/** What the link opens: a pending invitation and its account's name, or undefined. */
export async function findPendingInvitation(
  db: Db,
  token: string,
  now: Date,
): Promise<(Invitation & { account_name: string }) | undefined> {
  const row = await db
    .selectFrom('invitations')
    .innerJoin('accounts', 'accounts.id', 'invitations.account_id')
    .select(PUBLIC_COLUMNS.map((c) => `invitations.${c}` as const))
    .select('accounts.name as account_name')
    .where('invitations.token_hash', '=', tokenDigest(token))
    .executeTakeFirst()
  if (!row || row.accepted_at !== null || row.revoked_at !== null || row.expires_at <= now.toISOString()) {
    return undefined
  }
  return row
}

export type AcceptResult =
  | { ok: true; accountId: string; role: InvitedRole }
  /** No pending invitation behind this link: unknown, used, revoked or expired. */
  | { ok: false; code: 'invitation_not_found' }
  /** The signed-in person's email is not the invited one: nothing changes. */
  | { ok: false; code: 'invitation_wrong_email'; invitedEmail: string }
  /** Already a member: the invitation is used up, the role they have is kept. */
  | { ok: false; code: 'already_member'; accountId: string }

/** Marks the invitation used and adds the membership, together: a second acceptance adds nothing. */
export async function acceptInvitation(
  db: Kysely<Database>,
  token: string,
  user: User,
  now: Date,
): Promise<AcceptResult> {
  return inTransaction(db, async (trx): Promise<AcceptResult> => {
    const invitation = await findPendingInvitation(trx, token, now)
    if (!invitation) {
      return { ok: false, code: 'invitation_not_found' }
    }
    if (emailKey(invitation.email) !== emailKey(user.email)) {
      return { ok: false, code: 'invitation_wrong_email', invitedEmail: invitation.email }
    }
    const claimed = await pending(trx, invitation.account_id, now)
      .where('id', '=', invitation.id)
      .set({ accepted_at: now.toISOString(), accepted_by: user.id })
      .executeTakeFirst()
    if (Number(claimed.numUpdatedRows) === 0) {
      return { ok: false, code: 'invitation_not_found' }
    }
    const member = await trx
      .selectFrom('memberships')
      .select('role')
      .where('account_id', '=', invitation.account_id)
      .where('user_id', '=', user.id)
      .executeTakeFirst()
    if (member) {
      return { ok: false, code: 'already_member', accountId: invitation.account_id }
    }
    await trx
      .insertInto('memberships')
      .values({
        account_id: invitation.account_id,
        user_id: user.id,
        role: invitation.role,
        created_at: now.toISOString(),
      })
      .execute()
    return { ok: true, accountId: invitation.account_id, role: invitation.role }
  })
}
