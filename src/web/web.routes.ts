// The web application: its plugins (cookies, forms, uploads, helmet's security headers), the CSRF
// check of form posts, the error pages, the assets, and the registration of its parts.
import cookie from '@fastify/cookie'
import formbody from '@fastify/formbody'
import helmet from '@fastify/helmet'
import multipart from '@fastify/multipart'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Deps } from '../deps.js'
import { AppError, statusOf, titleOf, toAppError } from '../http/errors.js'
import { accountsPagesRoutes } from './accounts-pages.routes.js'
import { apiSettingsRoutes } from './api-settings.routes.js'
import { APP_CSS, APP_JS } from './assets.js'
import { authRoutes } from './auth.routes.js'
import { contactsCsvRoutes } from './contacts-csv.routes.js'
import { contactsPagesRoutes } from './contacts-pages.routes.js'
import { formField } from './forms.js'
import { membersRoutes } from './members.routes.js'
import { errorPage } from './pages/layout.js'
import { accountSessionsRoutes, peopleRoutes } from './people.routes.js'
import { createRender } from './render.js'
import { loadSessionUser, requireMembership, requireSignIn, sessionUser } from './request-context.js'
import { requestLogRoutes } from './request-log.routes.js'
import { crossOriginReason, originOf, SAFE_METHODS } from './same-origin.js'
import { isValidCsrf } from './session.js'
import { testDataRoutes } from './test-data.routes.js'
import { webhooksSettingsRoutes } from './webhooks-settings.routes.js'

export async function webRoutes(app: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const secure = deps.config.appUrl.startsWith('https:')
  const cookieOptions = { secure }
  const { db } = deps.database
  const render = createRender(deps.secret, cookieOptions)

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
    // The same as frame-ancestors 'none' for browsers that predate CSP's (helmet's default is SAMEORIGIN).
    xFrameOptions: { action: 'deny' },
    // Not helmet's no-referrer: under it browsers send `Origin: null` on the app's own form posts,
    // which the same-origin check below must refuse. same-origin still sends nothing to other sites.
    referrerPolicy: { policy: 'same-origin' },
  })

  const formExpired = (request: FastifyRequest, reply: FastifyReply) =>
    render(request, reply, (c) => errorPage(403, 'Form expired', 'Reload the page and submit the form again.', c), 403)

  // CSRF's second line (same-origin.ts), before the body is read or the session loaded: a forged
  // request costs no query.
  const appOrigin = originOf(deps.config.appUrl)
  app.addHook('onRequest', async (request, reply) => {
    if (SAFE_METHODS.has(request.method)) {
      return
    }
    const own = [appOrigin, originOf(`${request.protocol}://${request.host}`)].filter((o) => o !== undefined)
    const reason = crossOriginReason(request.headers, own)
    if (reason) {
      request.log.info({ reason }, 'cross-origin request refused')
      return render(
        request,
        reply,
        (c) =>
          errorPage(403, 'Refused', 'This form was sent from another site. Reload this site’s page and try again.', c),
        403,
      )
    }
  })

  loadSessionUser(app, db, deps.clock)

  // Every post carries the form's token, checked before validation. A multipart post is refused but
  // on a route that takes a file (`acceptsFile`: the CSV import checks the token first thing itself).
  app.addHook('preValidation', async (request, reply) => {
    if (request.method !== 'POST') {
      return
    }
    if (request.isMultipart()) {
      if (!(request.routeOptions.config as { acceptsFile?: boolean }).acceptsFile) {
        return formExpired(request, reply)
      }
      return
    }
    if (!isValidCsrf(request, deps.secret, formField(request.body, '_csrf'))) {
      return formExpired(request, reply)
    }
  })

  app.setErrorHandler((error: FastifyError, request, reply) => {
    // An empty JSON body on a route with a body schema carries no token either: the CSRF check's answer.
    if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
      return formExpired(request, reply)
    }
    // An input that fails its schema on a route without attachValidation gets an error page, never JSON.
    const appError = error instanceof AppError ? error : error.validation ? toAppError(error) : undefined
    if (appError?.code === 'not_found') {
      return render(
        request,
        reply,
        (c) => errorPage(404, 'Not found', 'There is nothing here, or you do not have access to it.', c),
        404,
      )
    }
    if (appError && statusOf(appError.code) < 500) {
      const status = statusOf(appError.code)
      // e.g. Retry-After on a 429
      reply.headers(appError.options.headers ?? {})
      // A key-scope refusal on a page is a role refusal to the person: it reads like the role hook's.
      const title = appError.code === 'insufficient_scope' ? 'Not allowed' : titleOf(appError.code)
      return render(request, reply, (c) => errorPage(status, title, appError.message, c), status)
    }
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      const message = 'Send the form as the browser does (application/x-www-form-urlencoded or multipart/form-data).'
      return render(request, reply, (c) => errorPage(415, 'Unsupported content type', message, c), 415)
    }
    if (error.statusCode === 413) {
      return render(request, reply, (c) => errorPage(413, 'Too large', 'The upload is larger than 5 MiB.', c), 413)
    }
    // Any other error Fastify raises for the request itself is the client's: a 4xx page, no error log.
    const status = error.statusCode ?? 500
    if (status >= 400 && status < 500) {
      return render(
        request,
        reply,
        (c) => errorPage(status, 'Bad request', 'The request could not be read. Send the form from this site.', c),
        status,
      )
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

  app.get('/', async (request, reply) => reply.redirect(sessionUser(request) ? '/app' : '/sign-in'))

  await app.register(authRoutes, { deps, render, cookieOptions })
  await app.register(peopleRoutes, { deps, render })

  await app.register(
    async (signedIn) => {
      requireSignIn(signedIn, db)
      signedIn.setNotFoundHandler((request, reply) =>
        render(request, reply, (c) => errorPage(404, 'Not found', 'There is nothing here.', c), 404),
      )
      await signedIn.register(accountsPagesRoutes, { deps, render })

      // Every page of an account checks that the signed-in person belongs to it; if not, 404. The
      // pages of a mode's data are served in both modes, test mode under /test; members and
      // sessions belong to the account and are served once.
      const modePages = async (scope: FastifyInstance) => {
        await scope.register(apiSettingsRoutes, { deps, render, cookieOptions })
        await scope.register(webhooksSettingsRoutes, { deps, render, cookieOptions })
        await scope.register(requestLogRoutes, { deps, render })
        await scope.register(contactsPagesRoutes, { deps, render })
        await scope.register(contactsCsvRoutes, { deps, render })
      }
      await signedIn.register(
        async (accountScope) => {
          requireMembership(accountScope, true)
          await modePages(accountScope)
          await accountScope.register(membersRoutes, { deps, render, cookieOptions })
          await accountScope.register(accountSessionsRoutes, { deps, render })
        },
        { prefix: '/:accountId' },
      )
      await signedIn.register(
        async (testScope) => {
          requireMembership(testScope, false)
          await modePages(testScope)
          await testScope.register(testDataRoutes, { deps, render })
        },
        { prefix: '/:accountId/test' },
      )
    },
    { prefix: '/app' },
  )
}
