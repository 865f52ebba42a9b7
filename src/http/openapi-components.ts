// Named components of the OpenAPI document: a schema with an `$id` becomes one component and a `$ref`
// wherever used (docs/design.md#openapi-document). Route schemas themselves are left untouched.

const SCHEMAS = '#/components/schemas/'

/** Marks a copy of a named schema (sameSchemaAs) as its component, as an `$id` would. */
const COMPONENT_OF = 'x-component-of'

/**
 * A copy of a named schema without its `$id`, documented as the same component: for a schema that
 * holds it more than once, as the serializer refuses one `$id` twice in a route's schema.
 */
export const sameSchemaAs = <T extends object>(schema: T & { $id?: string }): T => {
  const { $id, ...rest } = schema
  return { ...rest, [COMPONENT_OF]: $id } as T
}

export type SchemaComponents = Map<string, unknown>

/** A copy of `value` whose named schemas are `$ref`s, collected into `components`; `root`: may `value` be one. */
export function componentize(value: unknown, components: SchemaComponents, root = true): unknown {
  if (Array.isArray(value)) {
    return value.map((item) => componentize(item, components))
  }
  if (typeof value !== 'object' || value === null) {
    return value
  }
  const { $id: ownId, [COMPONENT_OF]: componentOf, ...rest } = value as Record<string, unknown>
  const $id = ownId ?? componentOf
  if (typeof $id === 'string' && root) {
    if (!components.has($id)) {
      // Reserved first, so a schema that refers to itself ends.
      components.set($id, {})
      components.set($id, componentize(rest, components, false))
    }
    return { $ref: `${SCHEMAS}${$id}` }
  }
  const copy = Object.fromEntries(Object.entries(rest).map(([key, member]) => [key, componentize(member, components)]))
  // A discriminated union's members exclude one another (each has its own `type`): oneOf says so.
  if (copy.discriminator !== undefined && Array.isArray(copy.anyOf)) {
    const { anyOf, ...others } = copy
    return { ...others, oneOf: anyOf }
  }
  return copy
}

interface Media {
  schema?: { $ref?: string }
  example?: unknown
  examples?: unknown
}
interface Response {
  headers?: Record<string, { schema?: Record<string, unknown>; description?: string } | { $ref: string }>
  content?: Record<string, Media>
}
interface Operation {
  [BODY_OPTIONAL]?: boolean
  requestBody?: { required?: boolean }
  parameters?: unknown[]
  responses?: Record<string, Response>
  security?: unknown[]
}
type Paths = Record<string, Record<string, Operation>>

const HEADERS = '#/components/headers/'

/** On a route's schema: the body may be left out (@fastify/swagger marks every body required). */
export const BODY_OPTIONAL = 'x-body-optional'

const COMMON_HEADERS = {
  RequestId: {
    description: 'The id of this request, also in a problem body (`request_id`) and in our logs: quote it to support.',
    schema: { type: 'string', pattern: '^req_[0-9A-HJKMNP-TV-Z]{26}$', maxLength: 30 },
  },
  Location: {
    description: 'The URL of the resource created.',
    schema: { type: 'string', format: 'uri', maxLength: 2048 },
  },
  IdempotentReplayed: {
    description:
      'Present, `true`, when this is the stored answer to an earlier request with the same Idempotency-Key and body.',
    schema: { type: 'string', enum: ['true'] },
  },
}

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes the POST safe to retry: the same key with the same body within 24 h replays the first answer (with `Idempotent-Replayed: true`); with another body it is 422 `idempotency_key_reused`, and while the first is still running 409 `idempotency_key_in_use`.',
  schema: {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7E]+$',
    examples: ['6f1c1c5e-9a43-4c2f-bb0e-4d1f7a3c2e10'],
  },
}

// The answers an Idempotency-Key can replay: a POST's own, and its handler's problems.
const REPLAYABLE = /^(2\d\d|400|403|404|409)$/

/**
 * Adds to the operations what no route schema states: Request-Id on every response, Location on a
 * 201, Idempotency-Key on /api/v1 POSTs, optional bodies (BODY_OPTIONAL); makes named response headers
 * (HEADER_COMPONENT) references; gives a success response its named schema's example.
 */
export function completeOperations(
  paths: Paths,
  schemas: SchemaComponents,
  headerMarker: string,
): { headers: Record<string, unknown>; parameters: Record<string, unknown> } {
  const headers: Record<string, unknown> = { ...COMMON_HEADERS }
  const ref = (name: string) => ({ $ref: `${HEADERS}${name}` })
  for (const [path, operations] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (operation[BODY_OPTIONAL] !== undefined) {
        if (operation.requestBody) {
          operation.requestBody.required = false
        }
        delete operation[BODY_OPTIONAL]
      }
      const idempotent = method === 'post' && path.startsWith('/api/v1/')
      if (idempotent) {
        operation.parameters = [...(operation.parameters ?? []), { $ref: '#/components/parameters/IdempotencyKey' }]
      }
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const named: NonNullable<Response['headers']> = {}
        for (const [name, header] of Object.entries(response.headers ?? {})) {
          const component = 'schema' in header ? header.schema?.[headerMarker] : undefined
          if (typeof component === 'string' && 'schema' in header) {
            const { [headerMarker]: _marker, ...schema } = header.schema ?? {}
            headers[component] = { ...header, schema }
            named[name] = ref(component)
          } else {
            named[name] = header
          }
        }
        response.headers = {
          'Request-Id': ref('RequestId'),
          ...(status === '201' ? { Location: ref('Location') } : {}),
          ...(idempotent && REPLAYABLE.test(status) ? { 'Idempotent-Replayed': ref('IdempotentReplayed') } : {}),
          ...named,
        }
        for (const media of Object.values(response.content ?? {})) {
          const name = media.schema?.$ref?.startsWith(SCHEMAS) ? media.schema.$ref.slice(SCHEMAS.length) : undefined
          const examples = (name && (schemas.get(name) as { examples?: unknown[] } | undefined)?.examples) || []
          if (media.example === undefined && media.examples === undefined && examples.length > 0) {
            media.example = examples[0]
          }
        }
      }
    }
  }
  return { headers, parameters: { IdempotencyKey: IDEMPOTENCY_KEY } }
}
