// The web application: sign-up, sign-in, sign-out, and the signed-in pages under /app.
// Server-rendered HTML; every form posts a CSRF token; security headers from helmet.
import cookie from '@fastify/cookie'
import formbody from '@fastify/formbody'
import helmet from '@fastify/helmet'
import multipart from '@fastify/multipart'
import { hash, verify } from '@node-rs/argon2'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Account } from '../accounts/accounts.store.js'
import { normalizeEmail } from '../contacts/contacts.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { AppError, statusOf, titleOf } from '../http/errors.js'
import { clientKey } from '../rate-limit/client-key.js'
import { createThrottle, SIGN_IN_WINDOW_MS } from '../rate-limit/sign-in-throttle.js'
import {
  type AccountMembership,
  createAccountForUser,
  createUserWithAccount,
  findMembership,
  findUserByEmail,
  listMemberships,
  type User,
} from '../users/users.store.js'
import { apiSettingsRoutes } from './api-settings.routes.js'
import { APP_CSS, APP_JS } from './assets.js'
import { contactsPagesRoutes } from './contacts-pages.routes.js'
import type { Html } from './html.js'
import { membersRoutes } from './members.routes.js'
import { type FormErrors, newAccountPage, signInPage, signUpPage } from './pages/auth-pages.js'
import { errorPage, type PageContext } from './pages/layout.js'
import {
  clearSessionCookie,
  createSession,
  csrfTokenFor,
  deleteSession,
  findSessionUser,
  isValidCsrf,
  SESSION_COOKIE,
  setSessionCookie,
} from './session.js'

const PASSWORD_MIN = 10

interface WebRequestState {
  user?: User
  memberships?: AccountMembership[]
  account?: Account
  role?: AccountMembership['role']
}
const states = new WeakMap<FastifyRequest, WebRequestState>()
const stateOf = (request: FastifyRequest): WebRequestState => {
  let state = states.get(request)
  if (!state) {
    state = {}
    states.set(request, state)
  }
  return state
}

/** The signed-in person and the account of an /app/:accountId page (the membership was checked). */
export function accountPage(request: FastifyRequest): {
  user: User
  account: Account
  role: AccountMembership['role']
} {
  const { user, account, role } = stateOf(request)
  if (!user || !account || !role) {
    throw new Error('not an account page')
  }
  return { user, account, role }
}

export type Render = (
  request: FastifyRequest,
  reply: FastifyReply,
  page: (context: PageContext) => Html,
  status?: number,
) => FastifyReply

export async function webRoutes(app: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const secure = deps.config.appUrl.startsWith('https:')
  const cookieOptions = { secure }
  const { db } = deps.database

  await app.register(cookie)
  await app.register(formbody, { bodyLimit: 64 * 1024 })
  await app.register(multipart, { limits: { fileSize: 5 * 1024 * 1024, files: 1, fields: 5 } })
  await app.register(helmet, {
    contentSecurityPolicy: {
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        objectSrc: ["'none'"],
        baseUri: ["'self'"],
        // Only meaningful behind https; on http://127.0.0.1 it would break form posts.
        upgradeInsecureRequests: secure ? [] : null,
      },
    },
    strictTransportSecurity: secure,
  })

  const render: Render = (request, reply, page, status = 200) => {
    const state = stateOf(request)
    const context: PageContext = {
      csrf: csrfTokenFor(request, reply, deps.secret, cookieOptions),
      ...(state.user ? { user: state.user } : {}),
      ...(state.memberships ? { memberships: state.memberships } : {}),
      ...(state.account ? { account: state.account } : {}),
    }
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(page(context).value)
  }

  app.addHook('onRequest', async (request) => {
    const token = request.cookies[SESSION_COOKIE]
    if (token) {
      const user = await findSessionUser(db, token, deps.clock.now())
      if (user) {
        stateOf(request).user = user
      }
    }
  })

  // Every state-changing request carries the form's token; multipart forms check it in their handler.
  app.addHook('preHandler', async (request, reply) => {
    if (request.method === 'POST' && !request.isMultipart()) {
      const submitted = (request.body as Record<string, unknown> | undefined)?._csrf
      if (!isValidCsrf(request, deps.secret, submitted)) {
        return render(
          request,
          reply,
          (c) => errorPage(403, 'Form expired', 'Reload the page and submit the form again.', c),
          403,
        )
      }
    }
  })

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof AppError && error.code === 'not_found') {
      return render(
        request,
        reply,
        (c) => errorPage(404, 'Not found', 'There is nothing here, or you do not have access to it.', c),
        404,
      )
    }
    if (error instanceof AppError && statusOf(error.code) < 500) {
      const status = statusOf(error.code)
      // e.g. Retry-After on a 429
      reply.headers(error.options.headers ?? {})
      return render(request, reply, (c) => errorPage(status, titleOf(error.code), error.message, c), status)
    }
    if ((error as { statusCode?: number }).statusCode === 413) {
      return render(request, reply, (c) => errorPage(413, 'Too large', 'The upload is larger than 5 MiB.', c), 413)
    }
    request.log.error({ err: error }, 'web page failed')
    return render(
      request,
      reply,
      (c) => errorPage(500, 'Something went wrong', 'Please try again in a moment.', c),
      500,
    )
  })

  app.get('/assets/app.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(APP_CSS),
  )
  app.get('/assets/app.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(APP_JS),
  )

  app.get('/', async (request, reply) => reply.redirect(stateOf(request).user ? '/app' : '/sign-in'))

  app.get('/sign-up', async (request, reply) => render(request, reply, (c) => signUpPage(c, {})))

  app.post('/sign-up', async (request, reply) => {
    const values = formValues(request, ['email', 'password', 'account_name'])
    const errors: FormErrors = {}
    const email = normalizeEmail(values.email)
    if (!email) {
      errors.email = 'Enter a valid email address, like ada@example.com.'
    }
    if (values.password.length < PASSWORD_MIN || values.password.length > 1024) {
      errors.password = `Use at least ${PASSWORD_MIN} characters.`
    }
    const accountName = values.account_name.trim()
    if (accountName.length === 0 || accountName.length > 256) {
      errors.account_name = 'Enter a name of 1 to 256 characters.'
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
      await startSession(reply, request, user.id)
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

  app.post('/sign-in', async (request, reply) => {
    const values = formValues(request, ['email', 'password'])
    const now = deps.clock.now()
    const emailKey = values.email.trim().toLowerCase()
    const ipKey = clientKey(request.ip)
    const wait = Math.max(await byEmail.retryAfter(emailKey, now), await byIp.retryAfter(ipKey, now))
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
    const user = emailKey ? await findUserByEmail(db, emailKey) : undefined
    // Verify against a real hash even for unknown emails, so timing does not reveal which exist.
    const ok = await verify(user?.password_hash ?? DUMMY_HASH, values.password).catch(() => false)
    if (!user || !ok) {
      await byEmail.fail(emailKey, now)
      await byIp.fail(ipKey, now)
      return render(
        request,
        reply,
        (c) => signInPage(c, { email: values.email }, { form: 'That email and password do not match an account.' }),
        401,
      )
    }
    await byEmail.reset(emailKey)
    await startSession(reply, request, user.id)
    return reply.redirect('/app', 303)
  })

  app.post('/sign-out', async (request, reply) => {
    const token = request.cookies[SESSION_COOKIE]
    if (token) {
      await deleteSession(db, token)
    }
    clearSessionCookie(reply, cookieOptions)
    return reply.redirect('/sign-in', 303)
  })

  /** A new session id at every sign-in (no fixation); the old one, if any, is deleted. */
  async function startSession(reply: FastifyReply, request: FastifyRequest, userId: string) {
    const previous = request.cookies[SESSION_COOKIE]
    if (previous) {
      await deleteSession(db, previous)
    }
    setSessionCookie(reply, await createSession(db, userId, deps.clock.now()), cookieOptions)
  }

  await app.register(
    async (signedIn) => {
      signedIn.addHook('onRequest', async (request, reply) => {
        const state = stateOf(request)
        if (!state.user) {
          return reply.redirect('/sign-in', 303)
        }
        state.memberships = await listMemberships(db, state.user.id)
      })
      signedIn.setNotFoundHandler((request, reply) =>
        render(request, reply, (c) => errorPage(404, 'Not found', 'There is nothing here.', c), 404),
      )

      signedIn.get('/', async (request, reply) => {
        const first = stateOf(request).memberships?.[0]
        return reply.redirect(first ? `/app/${first.account.id}/contacts` : '/app/accounts/new', 303)
      })
      signedIn.get('/accounts/new', async (request, reply) => render(request, reply, (c) => newAccountPage(c, {})))
      signedIn.post('/accounts', async (request, reply) => {
        const values = formValues(request, ['name'])
        const name = values.name.trim()
        if (name.length === 0 || name.length > 256) {
          return render(
            request,
            reply,
            (c) => newAccountPage(c, values, { name: 'Enter a name of 1 to 256 characters.' }),
            400,
          )
        }
        const user = stateOf(request).user as User
        const account = await createAccountForUser(db, user.id, name, deps.clock.now())
        return reply.redirect(`/app/${account.id}/contacts`, 303)
      })

      // Every page of an account checks that the signed-in person belongs to it; if not, 404.
      await signedIn.register(
        async (accountScope) => {
          accountScope.addHook('preHandler', async (request) => {
            const state = stateOf(request)
            const { accountId } = request.params as { accountId: string }
            const membership = state.user ? await findMembership(db, accountId, state.user.id) : undefined
            if (!membership) {
              throw new AppError('not_found', 'Not a member of this account.')
            }
            state.account = membership.account
            state.role = membership.role
          })
          await accountScope.register(apiSettingsRoutes, { deps, render })
          await accountScope.register(contactsPagesRoutes, { deps, render })
          await accountScope.register(membersRoutes, { deps, render })
        },
        { prefix: '/:accountId' },
      )
    },
    { prefix: '/app' },
  )
}

// A valid argon2id hash of a random password, verified when the email is unknown.
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$n5xj56n7FIvm4l/52lPcjWGyQ2iVXmEgktjNdfOu2kI'

/** The named fields of a urlencoded form, as strings ('' when absent or not text). */
export function formValues<K extends string>(request: FastifyRequest, names: K[]): Record<K, string> {
  const body = (request.body ?? {}) as Record<string, unknown>
  return Object.fromEntries(
    // U+0000 cannot be stored (DESIGN §4); a form cannot usefully send it, so it is dropped.
    names.map((name) => [name, typeof body[name] === 'string' ? (body[name] as string).replaceAll('\u0000', '') : '']),
  ) as Record<K, string>
}
