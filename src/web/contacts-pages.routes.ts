// Contacts pages under /app/:accountId/contacts (list, search, create, edit, delete, CSV).
import type { FastifyInstance } from 'fastify'
import type { Deps } from '../deps.js'
import type { Render } from './web.routes.js'

export async function contactsPagesRoutes(
  _app: FastifyInstance,
  _options: { deps: Deps; render: Render },
): Promise<void> {}
