// The request log as the API shows it (docs/request-log.md): an entry's schema, the list's filters,
// and the one conversion of a stored row.
import { type Static, Type } from '@sinclair/typebox'
import { ListQuery, Livemode, Nullable, PrefixedId, StringEnum, Timestamp } from '../http/schemas.js'
import { timeOfId } from '../lib/ids.js'

export const LOGGED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const

/** The longest path and user agent kept; a longer one is cut (docs/request-log.md). */
export const PATH_MAX = 1024
export const USER_AGENT_MAX = 512

export const RequestLogSchema = Type.Object(
  {
    object: Type.Literal('request_log'),
    id: PrefixedId('request'),
    livemode: Livemode,
    created_at: Timestamp,
    key_id: PrefixedId('apiKey'),
    method: Type.String({ maxLength: 16 }),
    path: Type.String({ maxLength: PATH_MAX, description: 'Without the query string.' }),
    route: Type.String({ maxLength: PATH_MAX, description: 'The route template, to group requests by.' }),
    status: Type.Integer({ format: 'int32', minimum: 100, maximum: 599 }),
    duration_ms: Type.Number({ minimum: 0, description: 'From the request read to the response sent, in ms.' }),
    error_code: Nullable(Type.String({ maxLength: 64, description: 'The problem’s `code` when the answer was one.' })),
    ip: Type.String({ maxLength: 64, description: 'The client’s address (TRUST_PROXY decides which hop).' }),
    user_agent: Nullable(Type.String({ maxLength: USER_AGENT_MAX })),
    idempotency_key: Nullable(Type.String({ maxLength: 255 })),
    idempotent_replayed: Type.Boolean({ description: 'true when the answer replayed an earlier one.' }),
  },
  {
    $id: 'RequestLog',
    additionalProperties: false,
    description: 'One authenticated request: never its bodies or its key.',
    examples: [
      {
        object: 'request_log',
        id: 'req_01JD3Z8Q4R5S6T7V8W9X0Y1Z2H',
        livemode: true,
        created_at: '2026-11-22T10:00:00.000Z',
        key_id: 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2K',
        method: 'GET',
        path: '/api/v1/contacts/con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A',
        route: '/api/v1/contacts/{id}',
        status: 404,
        duration_ms: 3,
        error_code: 'not_found',
        ip: '203.0.113.7',
        user_agent: 'contacts-api-client/0.1.0',
        idempotency_key: null,
        idempotent_replayed: false,
      },
    ],
  },
)
export type RequestLog = Static<typeof RequestLogSchema>

/** The `status` filter: an exact status, `404`, or a class, `4xx` (the API's and the web page's rule). */
export const STATUS_FILTER = '^[1-5]([0-9][0-9]|xx)$'

export const ListRequestLogsQuery = Type.Object(
  {
    ...ListQuery,
    status: Type.Optional(
      Type.String({
        pattern: STATUS_FILTER,
        maxLength: 3,
        description: 'An exact status, `404`, or a class, `4xx`.',
      }),
    ),
    key_id: Type.Optional(Type.String({ maxLength: 64, description: 'Requests made with this key.' })),
    method: Type.Optional(StringEnum(LOGGED_METHODS)),
    path: Type.Optional(
      Type.String({
        pattern: '^/',
        maxLength: PATH_MAX,
        description: 'Paths that start with this, e.g. `/api/v1/contacts/`.',
      }),
    ),
    created_after: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })),
    created_before: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })),
  },
  { additionalProperties: false },
)
export type RequestLogFilters = Omit<Static<typeof ListRequestLogsQuery>, 'limit' | 'after'>

/**
 * An entry as the log stores it: its fields in this order, in a JSON array (request-logs.store.ts).
 * An array rather than an object, so a batch's JSON is short and quick to write.
 */
export type StoredEntry = [
  id: string,
  keyId: string,
  method: string,
  path: string,
  route: string,
  status: number,
  durationMs: number,
  errorCode: string | null,
  ip: string,
  userAgent: string | null,
  idempotencyKey: string | null,
  replayed: 0 | 1,
]

/** Oldest first: ids sort in the order their requests arrived. */
export const byId = (a: StoredEntry, b: StoredEntry): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)

/** The API's representation of a stored entry; its time is its id's. */
export function toRequestLog(livemode: boolean, entry: StoredEntry): RequestLog {
  const [id, keyId, method, path, route, status, durationMs, errorCode, ip, userAgent, idempotencyKey, replayed] = entry
  return {
    object: 'request_log',
    id,
    livemode,
    created_at: new Date(timeOfId(id)).toISOString(),
    key_id: keyId,
    method,
    path,
    route,
    status,
    duration_ms: durationMs,
    error_code: errorCode,
    ip,
    user_agent: userAgent,
    idempotency_key: idempotencyKey,
    idempotent_replayed: replayed === 1,
  }
}
