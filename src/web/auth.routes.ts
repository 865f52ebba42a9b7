// Sign-up (throttled per client address; an existing email is answered as little as can be),
// sign-in (throttled per email and address pair and per address, with growing delays) and sign-out.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ACCOUNT_NAME_MAX } from '../accounts/accounts.store.js'
import { assertMayOwnAnother } from '../accounts/owned-accounts.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { emailKey, normalizeEmail } from '../lib/email.js'
import { clientKey } from '../rate-limit/client-key.js'
import { createSignInThrottle } from '../rate-limit/sign-in-throttle.js'
import { createSignUpThrottle } from '../rate-limit/sign-up-throttle.js'
import { createSession, deleteSession } from '../users/sessions.store.js'
import { createAccountForUser, createUserWithAccount, findUserByEmail } from '../users/users.store.js'
import { FormBody, formValues } from './forms.js'
import { safeNext } from './next-path.js'
import { type FormErrors, signInPage, signUpPage } from './pages/auth-pages.js'
import type { Render } from './render.js'
import { type CookieOptions, clearSessionCookie, SESSION_COOKIE, setSessionCookie } from './session.js'

const PASSWORD_MIN = 10

const SIGN_UP_FIELDS = ['email', 'password', 'account_name', 'next'] as const
const SIGN_IN_FIELDS = ['email', 'password', 'next'] as const
// An invitation's page links here with where to return and the invited email to fill in.
const AuthQuery = Type.Object({
  next: Type.Optional(Type.String()),
  email: Type.Optional(Type.String({ maxLength: 320 })),
})
const SignUpForm = FormBody(SIGN_UP_FIELDS)
const SignInForm = FormBody(SIGN_IN_FIELDS)
const SignOutForm = FormBody([])

/** "12 seconds", "3 minutes": how long to wait, as a person reads it. */
function waitText(seconds: number): string {
  if (seconds < 60) {
    return `${seconds} second${seconds === 1 ? '' : 's'}`
  }
  const minutes = Math.ceil(seconds / 60)
  return `${minutes} minute${minutes === 1 ? '' : 's'}`
}

export const authRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock' | 'config' | 'secret'>
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  const { db } = deps.database
  const signInThrottle = createSignInThrottle(db, deps.secret)
  const signUpThrottle = createSignUpThrottle(db, deps.secret, deps.config.signUpsPerHour)

  /** A new session id at every sign-in (no fixation); the old one, if any, is deleted. */
  async function startSession(request: FastifyRequest, reply: FastifyReply, userId: string) {
    const previous = request.cookies[SESSION_COOKIE]
    if (previous) {
      await deleteSession(db, previous)
    }
    setSessionCookie(reply, await createSession(db, userId, deps.clock.now()), cookieOptions)
  }

  const tooMany = (reply: FastifyReply, seconds: number) => {
    reply.header('retry-after', String(seconds))
    return `Too many attempts from your network. Try again in ${waitText(seconds)}.`
  }

  const prefill = (query: { email?: string | undefined }): Record<string, string> =>
    typeof query.email === 'string' ? { email: query.email } : {}

  app.get('/sign-up', { schema: { querystring: AuthQuery }, attachValidation: true }, async (request, reply) =>
    render(request, reply, (c) => signUpPage(c, prefill(request.query), {}, safeNext(request.query.next))),
  )

  app.post('/sign-up', { schema: { body: SignUpForm }, attachValidation: true }, async (request, reply) => {
    const values = formValues(request, SIGN_UP_FIELDS)
    const next = safeNext(values.next)
    const errors: FormErrors = {}
    const email = normalizeEmail(values.email)
    if (!email) {
      errors.email = 'Enter a valid email address, like ada@example.com.'
    }
    if (values.password.length < PASSWORD_MIN || values.password.length > 1024) {
      errors.password = `Use at least ${PASSWORD_MIN} characters.`
    }
    const accountName = values.account_name.trim()
    if (accountName.length === 0 || accountName.length > ACCOUNT_NAME_MAX) {
      errors.account_name = `Enter a name of 1 to ${ACCOUNT_NAME_MAX} characters.`
    }
    if (Object.keys(errors).length > 0 || !email) {
      return render(request, reply, (c) => signUpPage(c, values, errors, next), 400)
    }
    const shown = { email: values.email, account_name: values.account_name }
    const now = deps.clock.now()
    const address = clientKey(request.ip)
    // Every well-formed sign-up counts, new email or not: the budget also bounds how many emails
    // an address can test for being registered.
    const wait = await signUpThrottle.take(address, now)
    if (wait > 0) {
      const message = tooMany(reply, wait)
      return render(request, reply, (c) => signUpPage(c, shown, { form: message }, next), 429)
    }
    const existing = await findUserByEmail(db, email)
    if (existing) {
      return signUpExisting(request, reply, {
        user: existing,
        password: values.password,
        accountName,
        shown,
        now,
        next,
      })
    }
    const passwordHash = await (await argon2()).hash(values.password)
    try {
      const { user, account } = await createUserWithAccount(db, { email, passwordHash, accountName, now })
      await startSession(request, reply, user.id)
      return reply.redirect(next ?? landing(account.id), 303)
    } catch (error) {
      if (isUniqueViolation(error)) {
        // Signed up a moment ago by a concurrent request: the same answer as a wrong password below.
        return render(request, reply, (c) => signUpPage(c, shown, { email: EMAIL_REGISTERED }, next), 409)
      }
      throw error
    }
  })

  /**
   * A sign-up with a registered email: with the right password the person is signed in and gets the
   * account; with any other, only that the email is registered. A password check, so throttled as a
   * sign-in (docs/web-security.md, "What sign-up reveals").
   */
  async function signUpExisting(
    request: FastifyRequest,
    reply: FastifyReply,
    input: {
      user: { id: string; email: string; password_hash: string }
      password: string
      accountName: string
      shown: Record<string, string>
      now: Date
      next: string | undefined
    },
  ) {
    const attempt = await signInThrottle.attempt(emailKey(input.user.email), clientKey(request.ip), input.now)
    if (!attempt.allowed) {
      const message = tooMany(reply, attempt.retryAfter)
      return render(request, reply, (c) => signUpPage(c, input.shown, { form: message }, input.next), 429)
    }
    if (!(await (await argon2()).verify(input.user.password_hash, input.password).catch(() => false))) {
      return render(request, reply, (c) => signUpPage(c, input.shown, { email: EMAIL_REGISTERED }, input.next), 409)
    }
    await attempt.succeeded()
    await assertMayOwnAnother(db, input.user.id, deps.config.maxAccountsPerPerson)
    const account = await createAccountForUser(db, input.user.id, input.accountName, input.now)
    await startSession(request, reply, input.user.id)
    return reply.redirect(input.next ?? landing(account.id), 303)
  }

  app.get('/sign-in', { schema: { querystring: AuthQuery }, attachValidation: true }, async (request, reply) =>
    render(request, reply, (c) => signInPage(c, prefill(request.query), {}, safeNext(request.query.next))),
  )

  app.post('/sign-in', { schema: { body: SignInForm }, attachValidation: true }, async (request, reply) => {
    const values = formValues(request, SIGN_IN_FIELDS)
    const next = safeNext(values.next)
    const email = emailKey(values.email)
    const attempt = await signInThrottle.attempt(email, clientKey(request.ip), deps.clock.now())
    if (!attempt.allowed) {
      const message = tooMany(reply, attempt.retryAfter)
      return render(request, reply, (c) => signInPage(c, { email: values.email }, { form: message }, next), 429)
    }
    const user = email ? await findUserByEmail(db, email) : undefined
    // Verify against a real hash even for unknown emails, so timing does not reveal which exist.
    const ok = await (await argon2()).verify(user?.password_hash ?? DUMMY_HASH, values.password).catch(() => false)
    if (!user || !ok) {
      return render(
        request,
        reply,
        (c) =>
          signInPage(c, { email: values.email }, { form: 'That email and password do not match an account.' }, next),
        401,
      )
    }
    await attempt.succeeded()
    await startSession(request, reply, user.id)
    // /app opens the person's first account's contacts: where a sign-up lands too.
    return reply.redirect(next ?? '/app', 303)
  })

  app.post('/sign-out', { schema: { body: SignOutForm }, attachValidation: true }, async (request, reply) => {
    const token = request.cookies[SESSION_COOKIE]
    if (token) {
      await deleteSession(db, token)
    }
    clearSessionCookie(reply, cookieOptions)
    return reply.redirect('/sign-in', 303)
  })
}

/** Sign-up and sign-in land on the same page, the account's contacts (docs/web-app.md). */
const landing = (accountId: string) => `/app/${accountId}/contacts`

const EMAIL_REGISTERED = 'This email is already registered. Sign in with its password, or use another email.'

/** argon2's native binding, loaded at the first sign-up or sign-in rather than with the app (RSS). */
const argon2 = () => import('@node-rs/argon2')

// A valid argon2id hash of a random password, verified when the email is unknown.
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$n5xj56n7FIvm4l/52lPcjWGyQ2iVXmEgktjNdfOu2kI'
