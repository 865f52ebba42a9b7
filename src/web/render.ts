// Rendering a page: the frame's context for this request (CSRF token included), HTML, no-store.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Html } from './html.js'
import type { PageContext } from './pages/layout.js'
import { pageContext } from './request-context.js'
import { type CookieOptions, csrfTokenFor } from './session.js'

export type Page = (context: PageContext) => Html

export type Render = (request: FastifyRequest, reply: FastifyReply, page: Page, status?: number) => FastifyReply

export function createRender(secret: string, cookieOptions: CookieOptions): Render {
  return (request, reply, page, status = 200) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(page(pageContext(request, csrfTokenFor(request, reply, secret, cookieOptions))).value)
}
