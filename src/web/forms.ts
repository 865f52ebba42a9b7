// Urlencoded forms: the schema of a form's body, and reading its fields as text.
import { Type } from '@sinclair/typebox'

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
