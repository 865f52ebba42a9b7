// Shared TypeBox building blocks for route schemas: ids, timestamps, path and query parameters.
// What a route documents about its responses is in openapi-responses.ts.
import { type TSchema, Type } from '@sinclair/typebox'
import { type IdKind, idLength, idPattern } from '../lib/ids.js'
import { PageQuery } from './pagination.js'

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

/**
 * One of a few strings, as a JSON Schema `enum` rather than a union of constants: a wrong value
 * gets "must be one of a, b, c" (http/errors.ts), naming the choices.
 */
export const StringEnum = <const T extends readonly string[]>(values: T, options: { description?: string } = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })

const RFC3339 = /^(\d{4}|\+\d{6})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|[+-](\d\d):(\d\d))$/i

/**
 * RFC 3339's date-time (section 5.6), the rule of every `format: date-time`: a real calendar day,
 * and an offset of `Z` or `±hh:mm` (Ajv's own format also takes `+0100`, which RFC 3339 does not).
 */
export function isRfc3339DateTime(value: string): boolean {
  const match = RFC3339.exec(value)
  if (!match) {
    return false
  }
  const [year, month, day, hour, minute, second, offsetHour = 0, offsetMinute = 0] = match
    .slice(1)
    .map((part) => (part === undefined ? undefined : Number(part)))
  const daysInMonth = new Date(Date.UTC(year ?? 0, month ?? 0, 0)).getUTCDate()
  return (
    month !== undefined &&
    month >= 1 &&
    month <= 12 &&
    day !== undefined &&
    day >= 1 &&
    day <= daysInMonth &&
    (hour ?? 99) <= 23 &&
    (minute ?? 99) <= 59 &&
    (second ?? 99) <= 60 &&
    offsetHour <= 23 &&
    offsetMinute <= 59
  )
}

export const Timestamp = Type.String({
  format: 'date-time',
  // Written by Date#toISOString: 24 characters, 27 for a year past 9999 (an expiry set that far).
  maxLength: 27,
  description: 'RFC 3339 UTC with milliseconds',
  examples: ['2026-11-22T10:00:00.000Z'],
})

export const PrefixedId = (kind: IdKind) => Type.String({ pattern: idPattern(kind), maxLength: idLength(kind) })

// The router's maxParamLength (app.ts) answers a longer path parameter with 400 before this schema.
const ID_PARAM_MAX = 500

/** Path parameter `{id}`: any string, so a malformed id is a 404 like an unknown one (nothing to probe). */
export const IdParams = Type.Object({ id: Type.String({ maxLength: ID_PARAM_MAX }) }, { additionalProperties: false })

/** A route without query parameters: an unknown one is 400, as on the lists (no silent drops). */
export const NoQuery = Type.Object({}, { additionalProperties: false })

/** A list's paging parameters (http/pagination.ts), with `limit` documented as an int32. */
export const ListQuery = { ...PageQuery, limit: Type.Optional(Type.Integer({ ...PageQuery.limit, format: 'int32' })) }

/** On every API object: false for an object of the account's test mode (docs/test-mode.md). */
export const Livemode = Type.Boolean({ description: 'true in live mode, false in test mode (docs/test-mode.md).' })
