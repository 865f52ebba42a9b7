// GET /api/v1/me: verifies the key and returns its account.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { API_KEY_FIELDS } from '../api-keys/api-key.schemas.js'
import { RATE_LIMIT_MAX } from '../config.js'
import { CUSTOM_FIELDS_MAX, STRING_MAX } from '../contacts/contacts.schemas.js'
import type { Deps } from '../deps.js'
import { authOf } from '../http/auth.js'
import { apiProblems, jsonResponse } from '../http/openapi-responses.js'
import { PAGE_SIZE_MAX } from '../http/pagination.js'
import { Livemode, NoQuery, PrefixedId, Timestamp } from '../http/schemas.js'

const Limit = (minimum: number, maximum: number) => Type.Integer({ format: 'int32', minimum, maximum })

export const AccountSchema = Type.Object(
  {
    object: Type.Literal('account'),
    id: PrefixedId('account'),
    // Key names are at most KEY_NAME_MAX, but keys named through the CLI before that limit may be longer.
    name: Type.String({ maxLength: STRING_MAX }),
    created_at: Timestamp,
    livemode: Livemode,
    api_key: Type.Object(API_KEY_FIELDS),
    limits: Type.Object({
      requests_per_second: Limit(0, RATE_LIMIT_MAX),
      burst: Limit(0, RATE_LIMIT_MAX),
      page_size_max: Limit(1, PAGE_SIZE_MAX),
      custom_fields_max: Limit(1, CUSTOM_FIELDS_MAX),
      contacts_max: Type.Integer({
        minimum: 1,
        maximum: 1_000_000_000,
        format: 'int32',
        description:
          'MAX_CONTACTS_PER_ACCOUNT (MAX_TEST_CONTACTS_PER_ACCOUNT for a test key): beyond it a create is 403 quota_exceeded.',
      }),
    }),
  },
  {
    $id: 'Account',
    additionalProperties: false,
    examples: [
      {
        object: 'account',
        id: 'acct_01JD3Z8Q4R5S6T7V8W9X0Y1Z2D',
        name: 'Acme',
        created_at: '2026-11-01T09:00:00.000Z',
        livemode: true,
        api_key: {
          id: 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2E',
          name: 'Production',
          scopes: ['read', 'write'],
          created_at: '2026-11-01T09:05:00.000Z',
          expires_at: null,
        },
        limits: {
          requests_per_second: 100,
          burst: 200,
          page_size_max: 100,
          custom_fields_max: 50,
          contacts_max: 1_000_000,
        },
      },
    ],
  },
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
        operationId: 'getAccount',
        summary: 'The account of this API key',
        description: 'Verifies the key: 200 with its account, 401 for any key that is not valid.',
        querystring: NoQuery,
        response: { 200: jsonResponse(AccountSchema, 'The account, the key and its limits.'), ...apiProblems() },
      },
    },
    async (request) => {
      const { account, key, tenant } = authOf(request)
      return {
        object: 'account' as const,
        ...account,
        livemode: tenant.livemode,
        api_key: {
          id: key.id,
          name: key.name,
          scopes: key.scopes,
          created_at: key.created_at,
          expires_at: key.expires_at,
        },
        limits: { ...limits, contacts_max: deps.contacts.quota(tenant) },
      }
    },
  )
}
