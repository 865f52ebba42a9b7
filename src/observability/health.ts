// GET /healthz (the process answers) and GET /readyz (database reachable, migrations applied).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { isMigrated } from '../db/migrate.js'
import type { Deps } from '../deps.js'
import { AppError, ProblemSchema } from '../http/errors.js'

const Status = Type.Object({ status: Type.Literal('ok') })

export const healthRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/healthz',
    { schema: { summary: 'Liveness', tags: ['operations'], response: { 200: Status } } },
    async () => ({
      status: 'ok' as const,
    }),
  )

  app.get(
    '/readyz',
    { schema: { summary: 'Readiness', tags: ['operations'], response: { 200: Status, 503: ProblemSchema } } },
    async (request) => {
      try {
        await deps.database.ping()
        if (await isMigrated(deps.database)) {
          return { status: 'ok' as const }
        }
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed')
      }
      throw new AppError('service_unavailable', 'The database is unreachable or not migrated.', {
        headers: { 'retry-after': '1' },
      })
    },
  )
}
