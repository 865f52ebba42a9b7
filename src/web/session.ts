// The session cookie (its token opens a session stored by users/sessions.store.ts) and CSRF tokens,
// derived from the session (or, before sign-in, from a random pre-session cookie) with SECRET.
import { randomBytes } from 'node:crypto'
import type {} from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { hmacSha256, safeEqual } from '../lib/crypto.js'
import { SESSION_TTL_MS } from '../users/sessions.store.js'

export const SESSION_COOKIE = 'sid'
/** Before sign-in, forms are protected by a token bound to this random cookie instead. */
export const PRE_SESSION_COOKIE = 'pre'

export interface CookieOptions {
  secure: boolean
}

export function setSessionCookie(reply: FastifyReply, token: string, options: CookieOptions): void {
  reply.setCookie(SESSION_COOKIE, token, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: options.secure,
    maxAge: SESSION_TTL_MS / 1000,
  })
}

export function clearSessionCookie(reply: FastifyReply, options: CookieOptions): void {
  reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: options.secure })
}

/**
 * The CSRF token for this request's forms: bound to the session cookie when signed in, else to a
 * pre-session cookie (set here when missing), so sign-in and sign-up forms are protected too.
 */
export function csrfTokenFor(
  request: FastifyRequest,
  reply: FastifyReply,
  secret: string,
  options: CookieOptions,
): string {
  // Cookies are not parsed when a request failed before the web plugin's hooks ran.
  const cookies = request.cookies ?? {}
  const session = cookies[SESSION_COOKIE]
  if (session) {
    return csrfToken(secret, `session:${session}`)
  }
  let pre = cookies[PRE_SESSION_COOKIE]
  if (!pre) {
    pre = randomBytes(16).toString('base64url')
    reply.setCookie(PRE_SESSION_COOKIE, pre, { path: '/', httpOnly: true, sameSite: 'lax', secure: options.secure })
    // Visible to the rest of this request, so the token rendered now matches the cookie just set.
    cookies[PRE_SESSION_COOKIE] = pre
    request.cookies = cookies
  }
  return csrfToken(secret, `pre:${pre}`)
}

export function isValidCsrf(request: FastifyRequest, secret: string, submitted: unknown): boolean {
  if (typeof submitted !== 'string' || submitted.length === 0) {
    return false
  }
  const session = request.cookies?.[SESSION_COOKIE]
  const pre = request.cookies?.[PRE_SESSION_COOKIE]
  const expected = session ? csrfToken(secret, `session:${session}`) : pre ? csrfToken(secret, `pre:${pre}`) : undefined
  return expected !== undefined && safeEqual(Buffer.from(submitted), Buffer.from(expected))
}

const csrfToken = (secret: string, binding: string): string =>
  hmacSha256(secret, `csrf.${binding}`).toString('base64url')
