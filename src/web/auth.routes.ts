// Sign-up, sign-in (throttled per email and per client address) and sign-out.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { hash, verify } from '@node-rs/argon2'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ACCOUNT_NAME_MAX } from '../accounts/accounts.store.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { emailKey, normalizeEmail } from '../lib/email.js'
import { clientKey } from '../rate-limit/client-key.js'
import { createThrottle, SIGN_IN_WINDOW_MS } from '../rate-limit/sign-in-throttle.js'
import { createSession, deleteSession } from '../users/sessions.store.js'
import { createUserWithAccount, findUserByEmail } from '../users/users.store.js'
import { FormBody, formValues } from './forms.js'
import { type FormErrors, signInPage, signUpPage } from './pages/auth-pages.js'
import type { Render } from './render.js'
import { type CookieOptions, clearSessionCookie, SESSION_COOKIE, setSessionCookie } from './session.js'

const PASSWORD_MIN = 10

const SIGN_UP_FIELDS = ['email', 'password', 'account_name'] as const
const SIGN_IN_FIELDS = ['email', 'password'] as const
const SignUpForm = FormBody(SIGN_UP_FIELDS)
const SignInForm = FormBody(SIGN_IN_FIELDS)
const SignOutForm = FormBody([])

export const authRoutes: FastifyPluginAsyncTypebox<{
  deps: Pick<Deps, 'database' | 'clock'>
  render: Render
  cookieOptions: CookieOptions
}> = async (app, { deps, render, cookieOptions }) => {
  const { db } = deps.database

  /** A new session id at every sign-in (no fixation); the old one, if any, is deleted. */
  async function startSession(request: FastifyRequest, reply: FastifyReply, userId: string) {
    const previous = request.cookies[SESSION_COOKIE]
    if (previous) {
      await deleteSession(db, previous)
    }
    setSessionCookie(reply, await createSession(db, userId, deps.clock.now()), cookieOptions)
  }

  app.get('/sign-up', async (request, reply) => render(request, reply, (c) => signUpPage(c, {})))

  app.post('/sign-up', { schema: { body: SignUpForm }, attachValidation: true }, async (request, reply) => {
    const values = formValues(request, SIGN_UP_FIELDS)
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
      return render(request, reply, (c) => signUpPage(c, values, errors), 400)
    }
    const passwordHash = await hash(values.password)
    try {
      const { user, account } = await createUserWithAccount(db, {
        email,
        passwordHash,
        accountName,
        now: deps.clock.now(),
      })
      await startSession(request, reply, user.id)
      return reply.redirect(`/app/${account.id}/settings/api`, 303)
    } catch (error) {
      if (isUniqueViolation(error)) {
        return render(
          request,
          reply,
          (c) => signUpPage(c, values, { email: 'An account with this email exists. Sign in instead.' }),
          409,
        )
      }
      throw error
    }
  })

  const byEmail = createThrottle(db, 'email', 5, SIGN_IN_WINDOW_MS)
  const byIp = createThrottle(db, 'ip', 20, SIGN_IN_WINDOW_MS)

  app.get('/sign-in', async (request, reply) => render(request, reply, (c) => signInPage(c, {})))

  app.post('/sign-in', { schema: { body: SignInForm }, attachValidation: true }, async (request, reply) => {
    const values = formValues(request, SIGN_IN_FIELDS)
    const now = deps.clock.now()
    const email = emailKey(values.email)
    const ipKey = clientKey(request.ip)
    const wait = Math.max(await byEmail.retryAfter(email, now), await byIp.retryAfter(ipKey, now))
    if (wait > 0) {
      reply.header('retry-after', String(wait))
      const minutes = Math.ceil(wait / 60)
      return render(
        request,
        reply,
        (c) =>
          signInPage(
            c,
            { email: values.email },
            { form: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.` },
          ),
        429,
      )
    }
    const user = email ? await findUserByEmail(db, email) : undefined
    // Verify against a real hash even for unknown emails, so timing does not reveal which exist.
    const ok = await verify(user?.password_hash ?? DUMMY_HASH, values.password).catch(() => false)
    if (!user || !ok) {
      await byEmail.fail(email, now)
      await byIp.fail(ipKey, now)
      return render(
        request,
        reply,
        (c) => signInPage(c, { email: values.email }, { form: 'That email and password do not match an account.' }),
        401,
      )
    }
    await byEmail.reset(email)
    await startSession(request, reply, user.id)
    return reply.redirect('/app', 303)
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

// A valid argon2id hash of a random password, verified when the email is unknown.
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$n5xj56n7FIvm4l/52lPcjWGyQ2iVXmEgktjNdfOu2kI'
