// A new secret shown once, on the page the creating POST redirects to (docs/design.md#web-application):
// sealed into a short-lived cookie for that page, bound to the session and the target, and cleared
// by the page that opens it. Sealed under a key derived from SECRET, so any instance can open it.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { deriveKey, seal, sha256Hex, unseal } from '../lib/crypto.js'

import { type CookieOptions, SESSION_COOKIE } from './session.js'

const COOKIE = 'secret_once'
// Long enough for a slow redirect, short enough that a secret never lingers in a browser's jar.
const TTL_MS = 5 * 60 * 1000
const PURPOSE = 'web-secret-shown-once'

interface Sealed {
  targetId: string
  secret: string
  expiresAt: number
  /** SHA-256 of the session token: another session (another person) cannot open it. */
  session: string
}

export interface SecretOnce {
  /** Seals the secret for the page at `path` (the redirect's target). */
  put(request: FastifyRequest, reply: FastifyReply, path: string, targetId: string, secret: string, now: Date): void
  /** The secret sealed for this target (key or endpoint) and session, once: the cookie is cleared whatever it held. */
  take(request: FastifyRequest, reply: FastifyReply, path: string, targetId: string, now: Date): string | undefined
}

export function createSecretOnce(appSecret: string, cookieOptions: CookieOptions): SecretOnce {
  const key = deriveKey(appSecret, PURPOSE)
  const options = (path: string) => ({
    path,
    httpOnly: true,
    sameSite: 'strict' as const,
    secure: cookieOptions.secure,
  })
  const sessionOf = (request: FastifyRequest) => sha256Hex(request.cookies?.[SESSION_COOKIE] ?? '')
  return {
    put(request, reply, path, targetId, secret, now) {
      const sealed: Sealed = { targetId, secret, expiresAt: now.getTime() + TTL_MS, session: sessionOf(request) }
      reply.setCookie(COOKIE, seal(JSON.stringify(sealed), key), {
        ...options(path),
        maxAge: TTL_MS / 1000,
      })
    },
    take(request, reply, path, targetId, now) {
      const cookie = request.cookies?.[COOKIE]
      if (!cookie) {
        return undefined
      }
      reply.clearCookie(COOKIE, options(path))
      let sealed: Sealed
      try {
        sealed = JSON.parse(unseal(cookie, key)) as Sealed
      } catch {
        return undefined
      }
      const valid =
        sealed.targetId === targetId && sealed.expiresAt > now.getTime() && sealed.session === sessionOf(request)
      return valid ? sealed.secret : undefined
    },
  }
}
