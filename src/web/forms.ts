// Urlencoded forms: the schema of a form's body, and reading its fields as text.
import { Type } from '@sinclair/typebox'
import { isRfc3339DateTime } from '../http/schemas.js'

/** A urlencoded value as parsed: text, or a list when the name is repeated (formValues reads it as ''). */
export const UrlencodedValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))

/**
 * The body schema of a form: the named fields, and any other (`_csrf`). A form route declares it with
 * `attachValidation: true` and reads fields through formValues, so a body that fails it (a JSON field
 * that is not text, a multipart body) is answered on the form page like any other bad input.
 */
export function FormBody<K extends string>(names: readonly K[]) {
  const fields = Object.fromEntries(names.map((name) => [name, UrlencodedValue]))
  return Type.Object(fields as Record<K, typeof UrlencodedValue>, { additionalProperties: true })
}

/** One field of a parsed body, of any type, or undefined (it reads `_csrf` before validation). */
export function formField(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined
}

/** The named fields of a form as text, '' when absent or not one text. */
export function formValues<Body, K extends FieldName<Body>>(
  request: { body: Body },
  names: readonly K[],
): Record<K, string> {
  return Object.fromEntries(
    names.map((name) => {
      const value = formField(request.body, name)
      // U+0000 cannot be stored (docs/design.md#identifiers-and-storage): a form's is dropped.
      return [name, typeof value === 'string' ? value.replaceAll('\u0000', '') : '']
    }),
  ) as Record<K, string>
}

// A typed body names its fields; an untyped one (`unknown`) may be asked for any.
type FieldName<Body> = unknown extends Body ? string : Extract<keyof Body, string>

/** A repeatable field (checkboxes of one name) as a list of texts: none, one, or many. */
export function formList(body: unknown, name: string): string[] {
  const value = formField(body, name)
  const values = Array.isArray(value) ? value : [value]
  return values.filter((item): item is string => typeof item === 'string')
}

const LOCAL_TIME = /^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)(:\d\d(\.\d{1,3})?)?$/
/** Ids hold a time from 1970 on; a time outside these bounds means the same as the bound. */
const TIME_MIN = 0
const TIME_MAX = Date.parse('9999-12-31T23:59:59.999Z')

/**
 * A time of a form: datetime-local's `2026-11-28T14:30[:05[.123]]`, read as UTC as the pages say,
 * RFC 3339 with its offset, or the pages' own `2026-11-28 14:30:05.123 UTC`. Undefined if none.
 */
export function parseFormTime(text: string): number | undefined {
  const plain = text.replace(/\s*UTC$/i, '')
  const local = LOCAL_TIME.exec(plain)
  const rfc3339 = local ? `${local[1]}T${local[2]}${local[3] ?? ':00'}Z` : plain
  if (!isRfc3339DateTime(rfc3339)) {
    return undefined
  }
  const ms = Date.parse(rfc3339)
  return Number.isFinite(ms) ? Math.min(TIME_MAX, Math.max(TIME_MIN, ms)) : undefined
}

/** A time as datetime-local shows it, in UTC: seconds always, milliseconds when there are any. */
export const asLocalTimeValue = (ms: number): string => new Date(ms).toISOString().replace(/(\.000)?Z$/, '')
