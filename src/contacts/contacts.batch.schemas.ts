// POST /contacts/batch: the shapes of a batch and of its results, built from the single-item
// endpoints' own schemas (ContactInput, ContactUpsertInput, IdParams, Contact, Problem).
import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox'
import { ProblemSchema } from '../http/errors.js'
import { sameSchemaAs } from '../http/openapi-components.js'
import { IdParams, StringEnum } from '../http/schemas.js'
import { ContactInputSchema, ContactSchema, UpsertContactSchema } from './contacts.schemas.js'

export const BATCH_MAX = 100
export const BATCH_OPS = ['create', 'upsert', 'update', 'delete'] as const
export type BatchOp = (typeof BATCH_OPS)[number]

const Id = IdParams.properties.id

/**
 * Each operation: its `op`, and what its single endpoint takes (the body as `contact`, the path's
 * `{id}` as `id`). Documented with the inputs as their components; a schema holding one `$id` twice
 * is refused by the serializer, hence sameSchemaAs.
 */
export const BATCH_OPERATIONS = {
  create: Type.Object(
    { op: Type.Literal('create'), contact: sameSchemaAs(ContactInputSchema) },
    { additionalProperties: false, description: 'As POST /contacts.' },
  ),
  upsert: Type.Object(
    { op: Type.Literal('upsert'), contact: sameSchemaAs(UpsertContactSchema) },
    { additionalProperties: false, description: 'As POST /contacts/upsert.' },
  ),
  update: Type.Object(
    { op: Type.Literal('update'), id: Id, contact: sameSchemaAs(ContactInputSchema) },
    { additionalProperties: false, description: 'As PATCH /contacts/{id}.' },
  ),
  delete: Type.Object(
    { op: Type.Literal('delete'), id: Id },
    { additionalProperties: false, description: 'As DELETE /contacts/{id}.' },
  ),
} satisfies Record<BatchOp, TObject>

const operationsOf = <T extends TSchema>(item: T) =>
  Type.Array(item, {
    minItems: 1,
    maxItems: BATCH_MAX,
    description: `1 to ${BATCH_MAX} operations, run in this order.`,
  })

/** The request as documented (and typed): a list of operations, told apart by `op`. */
export const BatchRequestSchema = Type.Object(
  {
    operations: operationsOf(
      Type.Union(Object.values(BATCH_OPERATIONS), {
        discriminator: { propertyName: 'op' },
      }),
    ),
  },
  { $id: 'ContactBatch', additionalProperties: false },
)
export type BatchRequest = Static<typeof BatchRequestSchema>
export type BatchOperation = BatchRequest['operations'][number]

/**
 * The envelope, what the route's validator checks before anything runs: an object of 1 to 100
 * operations, each with a known `op` and only the members that op takes (checked in
 * contacts.batch.ts against BATCH_OPERATIONS). The contact in each is checked per item, so one bad
 * contact fails only its own operation.
 */
export const BatchEnvelopeSchema = Type.Object(
  {
    operations: operationsOf(
      Type.Object(
        {
          op: StringEnum(BATCH_OPS),
          id: Type.Optional(Id),
          contact: Type.Optional(Type.Unknown()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)

/** A status an operation can fail with: its single endpoint's 4xx. */
export const BATCH_ITEM_FAILURES = [400, 403, 404, 409] as const

const BatchItemResult = Type.Union(
  [
    Type.Object(
      {
        status: Type.Union([Type.Literal(201), Type.Literal(200)], {
          description: '201: created (create, upsert); 200: updated (upsert, update).',
        }),
        contact: sameSchemaAs(ContactSchema),
      },
      { additionalProperties: false },
    ),
    Type.Object({ status: Type.Literal(204, { description: 'Deleted.' }) }, { additionalProperties: false }),
    Type.Object(
      {
        status: Type.Union(
          BATCH_ITEM_FAILURES.map((status) => Type.Literal(status)),
          { description: 'The status the single endpoint would have answered.' },
        ),
        problem: sameSchemaAs(ProblemSchema),
      },
      {
        additionalProperties: false,
        description:
          'The problem the single endpoint would have answered; a field error names its place in the batch (`/operations/3/contact/email`).',
      },
    ),
  ],
  { description: 'One operation’s result: a contact, nothing (deleted), or a problem.' },
)

export const BatchResponseSchema = Type.Object(
  {
    results: Type.Array(BatchItemResult, {
      minItems: 1,
      maxItems: BATCH_MAX,
      description: 'One per operation, in the request’s order.',
    }),
  },
  {
    $id: 'ContactBatchResults',
    additionalProperties: false,
  },
)
