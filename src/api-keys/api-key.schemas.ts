// An API key as the API shows it, never its secret: in GET /me (the key of the request) and in an
// api_key.exposed event (the key reported found in public).
import { type Static, Type } from '@sinclair/typebox'
import { STRING_MAX } from '../contacts/contacts.schemas.js'
import { Livemode, Nullable, PrefixedId, Timestamp } from '../http/schemas.js'
import { FULL_SCOPES } from './api-key.js'
import type { ApiKey } from './api-keys.store.js'

/** The fields /me shows of its key; the event's key has them too. */
export const API_KEY_FIELDS = {
  id: PrefixedId('apiKey'),
  // Key names are at most KEY_NAME_MAX, but keys named through the CLI before that limit may be longer.
  name: Type.String({ maxLength: STRING_MAX }),
  scopes: Type.Array(Type.Union([Type.Literal('read'), Type.Literal('write')]), { maxItems: FULL_SCOPES.length }),
  created_at: Timestamp,
  expires_at: Nullable(Timestamp),
}

export const ApiKeySchema = Type.Object(
  {
    object: Type.Literal('api_key'),
    ...API_KEY_FIELDS,
    redacted: Type.String({ maxLength: 64, description: 'Its prefix and mode and its last 4 characters.' }),
    revoked_at: Nullable(Timestamp),
    livemode: Livemode,
  },
  {
    $id: 'ApiKey',
    additionalProperties: false,
    examples: [
      {
        object: 'api_key',
        id: 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2E',
        name: 'CI deploy',
        scopes: ['read', 'write'],
        created_at: '2026-11-01T09:00:00.000Z',
        expires_at: null,
        redacted: 'service_live_…Lv01',
        revoked_at: '2026-11-22T10:00:00.000Z',
        livemode: true,
      },
    ],
  },
)
export type ApiKeyObject = Static<typeof ApiKeySchema>

export const toApiKeyObject = (key: ApiKey, livemode: boolean): ApiKeyObject => ({
  object: 'api_key',
  id: key.id,
  name: key.name,
  scopes: key.scopes,
  created_at: key.created_at,
  expires_at: key.expires_at,
  redacted: key.redacted,
  revoked_at: key.revoked_at,
  livemode,
})
