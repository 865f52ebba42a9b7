// What each role may do in an account, stated once: every web page and action asks `can` before it
// reads or changes anything, so a hidden button is never the only guard.
import type { Role } from './users.table.js'

export type Permission =
  /** Browse, create, edit, delete, import and export contacts. */
  | 'contacts'
  /** See the keys page, and create, roll or revoke read-only keys the person created. */
  | 'read_keys'
  /** Create, roll or revoke any key, full-access ones included. */
  | 'full_keys'
  /** Webhook endpoints and their secrets and deliveries. */
  | 'webhooks'
  /** Invite, change roles, remove members; see the members page. */
  | 'members'
  /** Delete the account. */
  | 'account'
  /** Delete all of the account's test data. */
  | 'test_data'

const GRANTS: Record<Role, ReadonlySet<Permission>> = {
  owner: new Set(['contacts', 'read_keys', 'full_keys', 'webhooks', 'members', 'account', 'test_data']),
  admin: new Set(['contacts', 'read_keys', 'full_keys', 'webhooks', 'test_data']),
  member: new Set(['contacts', 'read_keys']),
}

export const can = (role: Role, permission: Permission): boolean => GRANTS[role].has(permission)

export const ROLES: readonly Role[] = ['owner', 'admin', 'member']

export const isRole = (value: string): value is Role => (ROLES as readonly string[]).includes(value)
