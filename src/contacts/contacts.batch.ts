// A batch of contact writes (POST /contacts/batch): each operation checked as its single endpoint
// checks it, then all of them run in order in one transaction, and each gets the answer its single
// endpoint would have given. Runs of creates are written together, one INSERT per table
// (insertContactRun, contacts.batch-insert.ts), which is what makes a bulk load fast (docs/batch.md).
//
// Atomicity is per operation, without savepoints: every refusal (a bad contact, a taken email, the
// quota, an unknown id) is decided before its operation writes anything, so a refused operation
// leaves nothing behind and the others commit. Only a failure of the database itself (or a
// concurrent write of the same email three times running) fails the whole batch, with nothing done.
//
// Concurrent batches on PostgreSQL: the existing contacts a batch names are locked first, in id
// order (lockTargets), and its count changes go to one shard (contact-count.ts), so two batches
// do not take the same rows in crossing orders. Contacts that do not exist yet cannot be locked:
// two batches creating the same new emails in crossing orders can still deadlock (or one finds the
// other's email taken), and the batch runs again (retryOnConflict, contacts.store.ts), this time
// after taking its account's row lock (`serialized`), so that the batches run again cannot meet
// one another a second time. contacts.batch.concurrency.test.ts pins it.
import type { Static } from '@sinclair/typebox'
import type { FastifyError, FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'
import { sql } from 'kysely'
import { dialectOf } from '../db/dialect.js'
import type { Trx } from '../db/transaction.js'
import { AppError, problemOf, statusOf, toAppError } from '../http/errors.js'
import { validatorCompiler } from '../http/validation.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import { contactCount, quotaExceeded } from './contact-count.js'
import { BATCH_OPERATIONS, type BatchEnvelopeSchema, type BatchOperation } from './contacts.batch.schemas.js'
import { insertContactRun } from './contacts.batch-insert.js'
import { applyContactInput, emptyContact } from './contacts.js'
import { type Contact, type ContactInput, ContactInputSchema, UpsertContactSchema } from './contacts.schemas.js'
import {
  contactExists,
  deleteContact,
  findContactIdsByEmail,
  lockContact,
  updateLockedContact,
} from './contacts.store.js'

type Envelope = Static<typeof BatchEnvelopeSchema>
type UpsertInput = ContactInput & { email: string }

/** An operation whose contact passed its schema, or the problem its single endpoint would send. */
export type CheckedOperation =
  | { op: 'create'; input: ContactInput }
  | { op: 'upsert'; input: UpsertInput }
  | { op: 'update'; id: string; input: ContactInput }
  | { op: 'delete'; id: string }
  | { op: 'refused'; error: AppError }

/** What one operation answered. */
export type ItemResult = { status: 200 | 201; body: string } | { status: 204 } | { error: AppError }

/** A validator as Ajv compiles it: the verdict, and the errors of the last call. */
export interface AjvLike {
  (data: unknown): boolean
  errors?: FastifySchemaValidationError[] | null
}

// The validator the routes use, so a contact is refused with the very words its endpoint uses.
const compile = validatorCompiler() as unknown as (route: Parameters<FastifySchemaCompiler<unknown>>[0]) => AjvLike
const bodyValidator = (schema: object): AjvLike => compile({ schema, httpPart: 'body', method: 'POST', url: '' })
const contactValidators = {
  create: bodyValidator(ContactInputSchema),
  upsert: bodyValidator(UpsertContactSchema),
  update: bodyValidator(ContactInputSchema),
}

/** The members each op takes, and those it needs, read from the documented operations. */
const MEMBERS = Object.fromEntries(
  Object.entries(BATCH_OPERATIONS).map(([op, schema]) => [
    op,
    { allowed: Object.keys(schema.properties), required: [...(schema.required ?? [])] as string[] },
  ]),
) as unknown as Record<BatchOperation['op'], { allowed: string[]; required: string[] }>

/**
 * The route's body validator: the envelope's schema (checked first), then each operation's
 * members for its op, reported as Ajv reports them so the 400 reads like any other.
 */
export function batchEnvelopeValidator(validateEnvelope: AjvLike): AjvLike {
  const validate = ((data: unknown) => {
    if (!validateEnvelope(data)) {
      validate.errors = validateEnvelope.errors ?? null
      return false
    }
    const { operations } = data as Envelope
    for (const [index, operation] of operations.entries()) {
      const { allowed, required } = MEMBERS[operation.op]
      const at = `/operations/${index}`
      const extra = Object.keys(operation).find((name) => !allowed.includes(name))
      const missing = required.find((name) => !(name in operation))
      if (extra !== undefined || missing !== undefined) {
        validate.errors = [
          extra !== undefined
            ? {
                instancePath: at,
                schemaPath: '',
                keyword: 'additionalProperties',
                params: { additionalProperty: extra },
              }
            : { instancePath: at, schemaPath: '', keyword: 'required', params: { missingProperty: missing } },
        ]
        return false
      }
    }
    validate.errors = null
    return true
  }) as AjvLike
  return validate
}

/** Checks each operation's contact against its endpoint's schema (in memory, nothing read yet). */
export function checkOperations(operations: Envelope['operations']): CheckedOperation[] {
  return operations.map((operation) => {
    if (operation.op === 'delete') {
      return { op: 'delete', id: operation.id as string }
    }
    const validate = contactValidators[operation.op]
    if (!validate(operation.contact)) {
      const failure = { validation: validate.errors, validationContext: 'body' } as unknown as FastifyError
      return { op: 'refused', error: toAppError(failure) as AppError }
    }
    const input = operation.contact as UpsertInput
    return operation.op === 'update' ? { op: 'update', id: operation.id as string, input } : { op: operation.op, input }
  })
}

export interface BatchOptions {
  accountId: string
  maxContacts: number
  now: string
  /**
   * PostgreSQL: take the account's row lock (FOR NO KEY UPDATE, which contact inserts' foreign-key
   * checks do not wait for) before anything else: set on a run after a conflict, so the batches of
   * an account that conflicted run one at a time.
   */
  serialized?: boolean
}

/**
 * Runs the checked operations in order in `trx`. Creates (and upserts that create) wait in a run
 * that is written at once when another kind of operation comes, or at the end, so every operation
 * sees the effect of those before it: their events are in the order of the operations.
 */
export async function runBatch(trx: Trx, options: BatchOptions, operations: CheckedOperation[]): Promise<ItemResult[]> {
  const { accountId, maxContacts, now } = options
  const results: ItemResult[] = new Array(operations.length)
  await lockTargets(trx, accountId, operations, options.serialized === true)
  // Counted as operations go (the transaction's own view): a create past the quota is refused alone.
  let count = operations.some((o) => o.op === 'create' || o.op === 'upsert') ? await contactCount(trx, accountId) : 0
  let run: Array<{ index: number; contact: Contact; upsert: boolean }> = []

  const writeRun = async () => {
    if (run.length === 0) {
      return
    }
    const pending = run
    run = []
    // An upsert's email was looked up (and found free) just before it joined the run.
    const taken = await findContactIdsByEmail(
      trx,
      accountId,
      pending.flatMap(({ contact, upsert }) => (contact.email === null || upsert ? [] : [contact.email])),
    )
    const accepted: typeof pending = []
    for (const item of pending) {
      const key = item.contact.email === null ? undefined : emailKey(item.contact.email)
      const existingId = key === undefined ? undefined : taken.get(key)
      if (existingId !== undefined) {
        results[item.index] = { error: contactExists(existingId) }
      } else if (count >= maxContacts) {
        results[item.index] = { error: quotaExceeded(maxContacts) }
      } else {
        count++
        if (key !== undefined) {
          taken.set(key, item.contact.id)
        }
        accepted.push(item)
      }
    }
    const stored = await insertContactRun(
      trx,
      accountId,
      accepted.map((item) => item.contact),
      now,
    )
    for (const [i, item] of accepted.entries()) {
      results[item.index] = { status: 201, body: (stored[i] as { body: string }).body }
    }
  }

  const runOne = async (index: number, operation: CheckedOperation): Promise<ItemResult | undefined> => {
    switch (operation.op) {
      case 'refused':
        return { error: operation.error }
      case 'create':
        run.push({ index, contact: newContact(operation.input, now), upsert: false })
        return undefined
      case 'upsert': {
        await writeRun()
        const current = await lockContact(trx, accountId, { email: operation.input.email })
        if (current) {
          return { status: 200, body: (await updateLockedContact(trx, accountId, current, operation.input, now)).body }
        }
        run.push({ index, contact: newContact(operation.input, now), upsert: true })
        return undefined
      }
      case 'update': {
        await writeRun()
        const current = await lockContact(trx, accountId, { id: operation.id })
        if (!current) {
          return { error: notFound() }
        }
        // Checked before the write: a unique violation would abort the whole transaction on PostgreSQL.
        const next = applyContactInput(current.contact, operation.input, now)
        if (next.email !== null && emailKey(next.email) !== emailKey(current.contact.email ?? '')) {
          const existingId = (await findContactIdsByEmail(trx, accountId, [next.email])).get(emailKey(next.email))
          if (existingId !== undefined && existingId !== operation.id) {
            return { error: contactExists(existingId) }
          }
        }
        return { status: 200, body: (await updateLockedContact(trx, accountId, current, operation.input, now)).body }
      }
      case 'delete': {
        await writeRun()
        if (!(await deleteContact(trx, accountId, operation.id, now))) {
          return { error: notFound() }
        }
        count--
        return { status: 204 }
      }
    }
  }

  for (const [index, operation] of operations.entries()) {
    try {
      const result = await runOne(index, operation)
      if (result) {
        results[index] = result
      }
    } catch (error) {
      // The contact rules refuse an input before anything of its operation is written.
      if (!(error instanceof AppError)) {
        throw error
      }
      results[index] = { error }
    }
  }
  await writeRun()
  return results
}

/**
 * PostgreSQL: locks the existing contacts that the batch's upserts (by email), updates and deletes
 * (by id) name, in id order, before the batch writes anything. Taken one by one in the order of the
 * operations, two batches naming the same contacts in different orders each held one the other
 * wanted (40P01: 3 batches upserting 3 emails in different orders, 25 of 45 failed); taken in one
 * order, the second waits for the first before it holds any (FOR UPDATE: a delete needs no
 * stronger lock later). Two statements per batch with upserts (their emails' lookup, the lock), one
 * with only updates and deletes, none for a bulk load of creates. SQLite runs one write
 * transaction at a time.
 */
async function lockTargets(
  trx: Trx,
  accountId: string,
  operations: readonly CheckedOperation[],
  serialized: boolean,
): Promise<void> {
  if (dialectOf(trx) !== 'postgres') {
    return
  }
  if (serialized) {
    await sql`select 1 from accounts where id = ${accountId} for no key update`.execute(trx)
  }
  const ids = new Set<string>()
  const emails: string[] = []
  for (const operation of operations) {
    if (operation.op === 'update' || operation.op === 'delete') {
      ids.add(operation.id)
    } else if (operation.op === 'upsert') {
      emails.push(operation.input.email)
    }
  }
  // The emails' ids by the store's lookup, one index probe per email (an `email_lower IN` list can
  // be planned as a walk of the whole account: findContactIdsByEmail).
  for (const id of (await findContactIdsByEmail(trx, accountId, emails)).values()) {
    ids.add(id)
  }
  if (ids.size === 0) {
    return
  }
  await sql`
    select id from contacts where account_id = ${accountId} and id = any(${[...ids]}::text[])
    order by id for update`.execute(trx)
}

const newContact = (input: ContactInput, now: string): Contact =>
  applyContactInput(emptyContact(newId('contact'), now), input, now)

export const notFound = () => new AppError('not_found', 'No contact with this id exists in this account.')

/** `~` and `/` escaped, as in a JSON Pointer (RFC 6901). */
const pointerToken = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1')

/**
 * The problem of operation `index`, as its endpoint would send it, with each field error naming its
 * place in the batch as a JSON Pointer: `email` becomes `/operations/3/contact/email`.
 */
function itemProblem(error: AppError, index: number, requestId: string): string {
  const at = `/operations/${index}/contact`
  const errors = error.options.errors?.map(({ field, message }) => ({
    field: field === 'body' ? at : `${at}/${field.split('.').map(pointerToken).join('/')}`,
    message,
  }))
  const located = errors ? new AppError(error.code, error.message, { ...error.options, errors }) : error
  return JSON.stringify(problemOf(located, requestId))
}

/** The response body: one result per operation, in order; contacts spliced in as stored. */
export function batchResponseBody(results: readonly ItemResult[], requestId: string): string {
  const items = results.map((result, index) => {
    if ('error' in result) {
      return `{"status":${statusOf(result.error.code)},"problem":${itemProblem(result.error, index, requestId)}}`
    }
    return result.status === 204 ? '{"status":204}' : `{"status":${result.status},"contact":${result.body}}`
  })
  return `{"results":[${items.join(',')}]}`
}
