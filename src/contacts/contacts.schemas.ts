// The contact's shapes: one TypeBox source for validation, types and the OpenAPI document.
import { type Static, type TSchema, Type } from '@sinclair/typebox'
import { ListQuery, Livemode, Nullable, PrefixedId, Timestamp } from '../http/schemas.js'

export const STRING_MAX = 256
const TAGS_MAX = 50
export const TAG_MAX = 64
export const CUSTOM_FIELDS_MAX = 50
const CUSTOM_VALUE_MAX = 500
// __proto__ matches the characters but would set the object's prototype instead of a field.
export const CUSTOM_FIELD_KEY = '^(?!__proto__$)[A-Za-z0-9_]{1,40}$'

// Not blank: "   " would pass as a name (and as the one identifying field) while saying nothing.
const NOT_BLANK = '\\S'
const Text = Type.String({ minLength: 1, maxLength: STRING_MAX, pattern: NOT_BLANK })
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: TAG_MAX, pattern: NOT_BLANK }), {
  maxItems: TAGS_MAX,
  description: `Up to ${TAGS_MAX} tags, 1-${TAG_MAX} characters each; duplicates are dropped.`,
})
const CustomValue = Type.Union([Type.String({ maxLength: CUSTOM_VALUE_MAX }), Type.Number(), Type.Boolean()])

// What is stored went through the input schemas below (API, web app and CSV import alike), so the
// same limits hold for the contact a response carries.
const StoredText = Nullable(Type.String({ maxLength: STRING_MAX }))

/** A contact as the API shows it: the example of the document (docs/design.md#contacts). */
export const CONTACT_EXAMPLE = {
  object: 'contact',
  id: 'con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A',
  email: 'ada@example.com',
  first_name: 'Ada',
  last_name: 'Lovelace',
  phone: '+441632960961',
  company: 'Analytical Engines',
  job_title: null,
  tags: ['vip'],
  custom_fields: { plan: 'pro', seats: 12, beta: true },
  created_at: '2026-11-22T10:00:00.000Z',
  updated_at: '2026-11-22T10:05:00.000Z',
  livemode: true,
} as const

export const ContactSchema = Type.Object(
  {
    object: Type.Literal('contact'),
    id: PrefixedId('contact'),
    email: Nullable(Type.String({ format: 'email', maxLength: STRING_MAX })),
    first_name: StoredText,
    last_name: StoredText,
    phone: Nullable(Type.String({ maxLength: STRING_MAX, description: 'E.164' })),
    company: StoredText,
    job_title: StoredText,
    tags: Type.Array(Type.String({ maxLength: TAG_MAX }), { maxItems: TAGS_MAX }),
    custom_fields: Type.Record(Type.String(), CustomValue, { maxProperties: CUSTOM_FIELDS_MAX }),
    created_at: Timestamp,
    updated_at: Timestamp,
    livemode: Livemode,
  },
  { $id: 'Contact', additionalProperties: false, examples: [CONTACT_EXAMPLE] },
)
export type Contact = Static<typeof ContactSchema>

/**
 * The fields a client writes, stated once: the input schemas below, the CSV columns, the web form and
 * the stored row are checked against this list, so a new field fails to compile where it is not handled.
 */
export const CONTACT_FIELDS = [
  'email',
  'first_name',
  'last_name',
  'phone',
  'company',
  'job_title',
  'tags',
  'custom_fields',
] as const
export type ContactField = (typeof CONTACT_FIELDS)[number]

const writable = {
  email: Type.Optional(
    Nullable(
      Type.String({
        format: 'email',
        maxLength: STRING_MAX,
        description: 'Trimmed; unique per account, case-insensitively.',
      }),
    ),
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
} satisfies Record<ContactField, TSchema>

/** POST /contacts and PATCH /contacts/{id}: absent = unchanged, null clears. */
export const ContactInputSchema = Type.Object(writable, { $id: 'ContactInput', additionalProperties: false })
export type ContactInput = Static<typeof ContactInputSchema>

/** POST /contacts/upsert: the email is the key. */
export const UpsertContactSchema = Type.Object(
  {
    ...writable,
    email: Type.String({ format: 'email', maxLength: STRING_MAX, description: 'The contact to update, or to create.' }),
  },
  { $id: 'ContactUpsertInput', additionalProperties: false },
)

export const ListContactsQuery = Type.Object(
  {
    ...ListQuery,
    email: Type.Optional(Type.String({ minLength: 1, maxLength: STRING_MAX, description: 'Exact, case-insensitive.' })),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: TAG_MAX })),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: STRING_MAX,
        description: 'Prefix of the email, a name or the company; case-insensitive.',
      }),
    ),
    updated_after: Type.Optional(Type.String({ format: 'date-time', maxLength: STRING_MAX })),
    order: Type.Optional(
      Type.Union([Type.Literal('asc'), Type.Literal('desc')], {
        default: 'asc',
        description: 'By creation: asc (oldest first, so a walk also sees contacts created meanwhile) or desc.',
      }),
    ),
  },
  { additionalProperties: false },
)
/** The query without paging: what a cursor is bound to. */
export type ListContactsFilters = Omit<Static<typeof ListContactsQuery>, 'limit' | 'after'>
