// GET /api/v1/me: verifies the key and returns its account.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { CUSTOM_FIELDS_MAX } from '../contacts/contacts.schemas.js'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { ProblemSchema } from '../http/errors.js'
import { PAGE_SIZE_MAX } from '../http/pagination.js'
import { Nullable, PrefixedId, Timestamp } from '../http/schemas.js'

export const AccountSchema = Type.Object(
  {
    object: Type.Literal('account'),
    id: PrefixedId('account'),
    name: Type.String(),
    created_at: Timestamp,
    api_key: Type.Object({
      id: PrefixedId('apiKey'),
      name: Type.String(),
      scopes: Type.Array(Type.Union([Type.Literal('read'), Type.Literal('write')])),
      created_at: Timestamp,
      expires_at: Nullable(Timestamp),
    }),
    limits: Type.Object({
      requests_per_second: Type.Integer(),
      burst: Type.Integer(),
      page_size_max: Type.Integer(),
      custom_fields_max: Type.Integer(),
    }),
  },
  { $id: 'Account', additionalProperties: false },
)

export const accountsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const limits = {
    requests_per_second: deps.config.rateLimit.perSecond,
    burst: deps.config.rateLimit.burst,
    page_size_max: PAGE_SIZE_MAX,
    custom_fields_max: CUSTOM_FIELDS_MAX,
  }
  app.get(
    '/me',
    {
      schema: {
        summary: 'The account of this API key',
        description: 'Verifies the key: 200 with its account, 401 for any key that is not valid.',
        response: { 200: AccountSchema, 401: ProblemSchema },
      },
    },
    async (request) => {
      const { account, key } = authOf(request)
      return {
        object: 'account' as const,
        ...account,
        api_key: {
          id: key.id,
          name: key.name,
          scopes: key.scopes,
          created_at: key.created_at,
          expires_at: key.expires_at,
        },
        limits,
      }
    },
  )
}
