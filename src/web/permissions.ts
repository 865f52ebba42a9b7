// The role check of web pages (users/roles.ts says what each role may do): a hook that refuses a
// page or action, by URL or by a forged post alike, before its handler reads or changes anything.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { can, type Permission } from '../users/roles.js'
import { errorPage } from './pages/layout.js'
import type { Render } from './render.js'
import { accountContext } from './request-context.js'

export function requirePermission(render: Render, permission: Permission, message: string) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (!can(accountContext(request).role, permission)) {
      return render(request, reply, (c) => errorPage(403, 'Not allowed', message, c), 403)
    }
  }
}
