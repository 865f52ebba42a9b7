// Per-request web state: who is signed in (from the session cookie), their accounts, and the account
// of an /app/:accountId page. The hooks below fill it; routes and pages read it through accessors.
import { type Static, Type } from '@sinclair/typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Account } from '../accounts/accounts.store.js'
import { type Tenant, tenantOf } from '../accounts/tenant.js'
import type { AuditActor } from '../audit/audit.js'
import type { Db } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import type { Clock } from '../lib/clock.js'
import { findSessionUser } from '../users/sessions.store.js'
import { type AccountMembership, listMemberships, type User } from '../users/users.store.js'
import type { PageContext } from './pages/layout.js'
import { SESSION_COOKIE } from './session.js'

interface WebRequestState {
  user?: User
  memberships?: AccountMembership[]
  account?: Account
  role?: AccountMembership['role']
  tenant?: Tenant
}

// Beside the request rather than decorated onto it, like the API's auth context (http/auth.ts).
const states = new WeakMap<FastifyRequest, WebRequestState>()

function stateOf(request: FastifyRequest): WebRequestState {
  let state = states.get(request)
  if (!state) {
    state = {}
    states.set(request, state)
  }
  return state
}

/** Adds the hook that signs in every request whose session cookie opens an unexpired session. */
export function loadSessionUser(scope: FastifyInstance, db: Db, clock: Clock): void {
  scope.addHook('onRequest', async (request) => {
    const token = request.cookies[SESSION_COOKIE]
    if (token) {
      const user = await findSessionUser(db, token, clock.now(), request.headers['user-agent'])
      if (user) {
        stateOf(request).user = user
      }
    }
  })
}

/** Adds the hook that sends signed-out visitors to sign in, and loads the accounts of the signed-in. */
export function requireSignIn(scope: FastifyInstance, db: Db): void {
  scope.addHook('onRequest', async (request, reply) => {
    const state = stateOf(request)
    if (!state.user) {
      return reply.redirect('/sign-in', 303)
    }
    state.memberships = await listMemberships(db, state.user.id)
  })
}

export const AccountParams = Type.Object({ accountId: Type.String() })

/**
 * Adds the hook that lets only the account's members in: to anyone else its pages are a 404. It
 * reads the memberships requireSignIn loaded for this request, so the scope must be behind it.
 */
export function requireMembership(scope: FastifyInstance, livemode: boolean): void {
  // Before validation, so a page's input checks tell a non-member nothing about the account.
  scope.addHook<{ Params: Static<typeof AccountParams> }>('preValidation', async (request) => {
    const state = stateOf(request)
    const membership = state.memberships?.find((m) => m.account.id === request.params.accountId)
    if (!membership) {
      throw new AppError('not_found', 'Not a member of this account.')
    }
    state.account = membership.account
    // A member has the same role in the account's test mode.
    state.role = membership.role
    state.tenant = tenantOf(membership.account.id, livemode)
  })
}

/** The root path of a tenant's pages: /app/{account} in live mode, /app/{account}/test in test mode. */
export const homeOf = (tenant: Tenant): string => `/app/${tenant.accountId}${tenant.livemode ? '' : '/test'}`

export const sessionUser = (request: FastifyRequest): User | undefined => stateOf(request).user

export interface SignedInContext {
  user: User
  memberships: AccountMembership[]
}

/** The signed-in person and their accounts (oldest first), on a page behind requireSignIn. */
export function signedInContext(request: FastifyRequest): SignedInContext {
  const { user, memberships } = stateOf(request)
  if (!user || !memberships) {
    throw new Error(`route ${request.url} is not behind requireSignIn`)
  }
  return { user, memberships }
}

export interface AccountContext {
  user: User
  account: Account
  role: AccountMembership['role']
  /** The account in this page's mode: whose data the page shows and changes. */
  tenant: Tenant
  /** The root path of this page's mode (homeOf). */
  home: string
}

/** The signed-in person and the account of a page behind requireMembership, with their role in it. */
export function accountContext(request: FastifyRequest): AccountContext {
  const { user, account, role, tenant } = stateOf(request)
  if (!user || !account || !role || !tenant) {
    throw new Error(`route ${request.url} is not behind requireMembership`)
  }
  return { user, account, role, tenant, home: homeOf(tenant) }
}

/** The signed-in person of an account's page as the audit log names an actor. */
export const auditActorOf = (request: FastifyRequest): AuditActor => ({
  userId: accountContext(request).user.id,
  ip: request.ip,
})

/** What the page frame shows of this request: the person, their accounts, the current account. */
export function pageContext(request: FastifyRequest, csrf: string): PageContext {
  const { user, memberships, account, role, tenant } = stateOf(request)
  return {
    csrf,
    ...(user ? { user } : {}),
    ...(memberships ? { memberships } : {}),
    ...(account ? { account } : {}),
    ...(role ? { role } : {}),
    ...(tenant ? { tenant } : {}),
  }
}
