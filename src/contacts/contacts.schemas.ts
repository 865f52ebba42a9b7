// The contact's shapes: one TypeBox source for validation, types and the OpenAPI document.
import { type Static, Type } from '@sinclair/typebox'
import { PageQuery } from '../http/pagination.js'
import { Nullable, PrefixedId, Timestamp } from '../http/schemas.js'

export const STRING_MAX = 256
export const TAGS_MAX = 50
export const CUSTOM_FIELDS_MAX = 50
export const CUSTOM_VALUE_MAX = 500
// __proto__ matches the characters but would set the object's prototype instead of a field.
export const CUSTOM_FIELD_KEY = '^(?!__proto__$)[A-Za-z0-9_]{1,40}$'

const Text = Type.String({ minLength: 1, maxLength: STRING_MAX })
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  maxItems: TAGS_MAX,
  description: `Up to ${TAGS_MAX} tags, 1-64 characters each; duplicates are dropped.`,
})
const CustomValue = Type.Union([Type.String({ maxLength: CUSTOM_VALUE_MAX }), Type.Number(), Type.Boolean()])

export const ContactSchema = Type.Object(
  {
    object: Type.Literal('contact'),
    id: PrefixedId('contact'),
    email: Nullable(Type.String()),
    first_name: Nullable(Type.String()),
    last_name: Nullable(Type.String()),
    phone: Nullable(Type.String({ description: 'E.164' })),
    company: Nullable(Type.String()),
    job_title: Nullable(Type.String()),
    tags: Type.Array(Type.String()),
    custom_fields: Type.Record(Type.String(), CustomValue),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Contact', additionalProperties: false },
)
export type Contact = Static<typeof ContactSchema>

const writable = {
  email: Type.Optional(
    Nullable(Type.String({ maxLength: STRING_MAX, description: 'Trimmed; unique per account, case-insensitively.' })),
  ),
  first_name: Type.Optional(Nullable(Text)),
  last_name: Type.Optional(Nullable(Text)),
  phone: Type.Optional(
    Nullable(Type.String({ maxLength: STRING_MAX, description: 'International format; stored as E.164.' })),
  ),
  company: Type.Optional(Nullable(Text)),
  job_title: Type.Optional(Nullable(Text)),
  tags: Type.Optional(Nullable(Tags)),
  custom_fields: Type.Optional(
    Nullable(
      Type.Record(Type.String({ pattern: CUSTOM_FIELD_KEY }), Nullable(CustomValue), {
        // TypeBox writes the key rule as patternProperties, which alone lets other keys through.
        additionalProperties: false,
        maxProperties: CUSTOM_FIELDS_MAX,
        description: 'Merged per key; a null value deletes the key.',
      }),
    ),
  ),
}

/** POST /contacts and PATCH /contacts/{id}: absent = unchanged, null clears. */
export const ContactInputSchema = Type.Object(writable, { additionalProperties: false })
export type ContactInput = Static<typeof ContactInputSchema>

/** POST /contacts/upsert: the email is the key. */
export const UpsertContactSchema = Type.Object(
  { ...writable, email: Type.String({ maxLength: STRING_MAX }) },
  { additionalProperties: false },
)

export const ListContactsQuery = Type.Object(
  {
    ...PageQuery,
    email: Type.Optional(Type.String({ minLength: 1, maxLength: STRING_MAX, description: 'Exact, case-insensitive.' })),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: STRING_MAX,
        description: 'Prefix of the email, a name or the company; case-insensitive.',
      }),
    ),
    updated_after: Type.Optional(Type.String({ format: 'date-time' })),
    order: Type.Union([Type.Literal('asc'), Type.Literal('desc')], {
      default: 'asc',
      description: 'By creation: asc (oldest first, so a walk also sees contacts created meanwhile) or desc.',
    }),
  },
  { additionalProperties: false },
)
/** The query without paging: what a cursor is bound to. */
export type ListContactsFilters = Omit<Static<typeof ListContactsQuery>, 'limit' | 'after'>
