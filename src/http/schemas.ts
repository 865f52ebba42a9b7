// Shared TypeBox building blocks for route schemas.
import { type TSchema, Type } from '@sinclair/typebox'
import { type IdKind, idPattern } from '../lib/ids.js'

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

export const Timestamp = Type.String({
  format: 'date-time',
  description: 'RFC 3339 UTC with milliseconds',
  examples: ['2026-11-22T10:00:00.000Z'],
})

export const PrefixedId = (kind: IdKind) => Type.String({ pattern: idPattern(kind) })

/** Path parameter `{id}`: any string, so a malformed id is a 404 like an unknown one (nothing to probe). */
export const IdParams = Type.Object({ id: Type.String() }, { additionalProperties: false })
