// The audit log of sensitive account actions, each entry written in the transaction of the action it
// records. It also counts how fast a person issues keys from the web.
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { Db } from '../db/transaction.js'
import { newId } from '../lib/ids.js'
import { retryAfter, type SlidingWindow } from '../rate-limit/sliding-window.js'

/** The actions about keys and about the account's test data (the API keys page shows them). */
export const KEY_ACTIONS = [
  'api_key.created',
  'api_key.rolled',
  'api_key.revoked',
  /** Its creator left the account and an owner chose to keep the key working. */
  'api_key.kept',
  /** A leaked-key report named it (found in public); revoked with it unless the action is notify. */
  'api_key.exposed',
  'test_data.deleted',
] as const
/** The actions about webhooks (the webhooks page shows them). */
export const WEBHOOK_ACTIONS = [
  'webhook_endpoint.created',
  'webhook_endpoint.updated',
  'webhook_endpoint.deleted',
  'webhook_endpoint.secret_rolled',
  'webhook_endpoint.secret_revealed',
  'webhook_endpoint.test_sent',
  'webhook_delivery.retried',
  /** Every failed delivery of a time range queued again. */
  'webhook_endpoint.recovered',
] as const

export type AuditAction = (typeof KEY_ACTIONS)[number] | (typeof WEBHOOK_ACTIONS)[number]

/** Who acted: a signed-in person's user id and client address, or null for the command line. */
export type AuditActor = { userId: string; ip: string } | null

export interface AuditEntry {
  action: AuditAction
  targetId: string
  actor: AuditActor
  detail: Record<string, unknown>
}

export interface AuditRecord {
  id: string
  at: string
  action: AuditAction
  targetId: string
  actorUserId: string | null
  actorEmail: string | null
  ip: string | null
  detail: Record<string, unknown>
}

/**
 * Keys one person may issue (create or roll) in an account from the web per hour. Per person, so a
 * member spending it never blocks an owner; revoking, what one does when a key leaks, is never limited.
 */
export const KEY_ISSUES_PER_HOUR = 30
const KEY_ISSUE_WINDOW: SlidingWindow = { max: KEY_ISSUES_PER_HOUR, windowMs: 3600_000 }
const KEY_ISSUES: AuditAction[] = ['api_key.created', 'api_key.rolled']

export async function recordAudit(db: Db, accountId: string, entry: AuditEntry, now: Date): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      account_id: accountId,
      id: newId('auditEntry', now.getTime()),
      at: now.toISOString(),
      actor_user_id: entry.actor?.userId ?? null,
      action: entry.action,
      target_id: entry.targetId,
      detail: JSON.stringify(entry.detail),
      ip: entry.actor?.ip ?? null,
    })
    .execute()
}

/** Seconds until this person may issue a key in the account again, or 0: the last hour's log is the budget. */
export async function keyIssueRetryAfter(
  db: Kysely<Database>,
  accountId: string,
  userId: string,
  now: Date,
): Promise<number> {
  const issued = db
    .selectFrom('audit_log')
    .where('account_id', '=', accountId)
    .where('actor_user_id', '=', userId)
    .where('action', 'in', KEY_ISSUES)
  return retryAfter(issued, KEY_ISSUE_WINDOW, now)
}

/** The account's latest entries, newest first, with the email of the person who acted. */
/** The account's newest entries, of these actions only when given (a page shows its own kind). */
export async function listAudit(
  db: Kysely<Database>,
  accountId: string,
  limit: number,
  actions?: readonly AuditAction[],
): Promise<AuditRecord[]> {
  const rows = await db
    .selectFrom('audit_log')
    .leftJoin('users', 'users.id', 'audit_log.actor_user_id')
    .select([
      'audit_log.id',
      'audit_log.at',
      'audit_log.action',
      'audit_log.target_id',
      'audit_log.actor_user_id',
      'users.email',
      'audit_log.ip',
      'audit_log.detail',
    ])
    .where('audit_log.account_id', '=', accountId)
    .$if(actions !== undefined, (query) => query.where('audit_log.action', 'in', actions ?? []))
    .orderBy('audit_log.id', 'desc')
    .limit(limit)
    .execute()
  return rows.map((row) => ({
    id: row.id,
    at: row.at,
    action: row.action as AuditAction,
    targetId: row.target_id,
    actorUserId: row.actor_user_id,
    actorEmail: row.email,
    ip: row.ip,
    detail: JSON.parse(row.detail) as Record<string, unknown>,
  }))
}
