// A list of contact operations run in one transaction, each answered as its single endpoint would
// answer it: a batch (POST /contacts/batch) and a slice of a CSV import. The contacts the operations
// name are read (and locked) first, in one statement; the operations are then decided in order in
// memory, each seeing the effect of those before it; and all their changes are written at the end
// by writeContacts. A refused operation writes nothing, so the others can commit without it.
import { sql } from 'kysely'
import type { Tenant } from '../accounts/tenant.js'
import { type Dialect, dialectOf } from '../db/dialect.js'
import { bind, type Statement, sqlFor } from '../db/statement.js'
import type { Trx } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import { emailKey } from '../lib/email.js'
import { newId } from '../lib/ids.js'
import { contactCount, quotaExceeded } from './contact-count.js'
import { type ContactChange, type WriteScope, writeContacts } from './contact-writes.js'
import { applyContactInput, emptyContact, parseStoredContact } from './contacts.js'
import type { Contact, ContactInput } from './contacts.schemas.js'
import { contactExists, findContactIdsByEmail } from './contacts.store.js'

export type ContactOperation =
  | { op: 'create'; input: ContactInput }
  /** With replaceCustomFields, the input's custom_fields replace the stored ones (a CSV row is the whole contact). */
  | { op: 'upsert'; input: ContactInput & { email: string }; replaceCustomFields?: boolean }
  | { op: 'update'; id: string; input: ContactInput }
  | { op: 'delete'; id: string }
  /** Refused before it ran (its input failed the schema): answered with this error. */
  | { op: 'refused'; error: AppError }

export type OperationResult =
  | { status: 201; body: string }
  /** `changed`: false when the input changed nothing (no event written). */
  | { status: 200; body: string; changed: boolean }
  | { status: 204 }
  | { error: AppError }

export interface OperationsScope extends Omit<WriteScope, 'accountId'> {
  tenant: Tenant
  /** Creates beyond this count are refused with quota_exceeded. */
  maxContacts: number
  /**
   * PostgreSQL: take the account's row lock first (FOR NO KEY UPDATE, which contact inserts'
   * foreign-key checks do not wait for), so that the account's transactions run one at a time:
   * set when a run conflicted and is run again.
   */
  serialized?: boolean
}

export const notFound = (): AppError => new AppError('not_found', 'No contact with this id exists in this account.')

/** A contact as the operations so far left it: as stored (`body`), or as changed by change `change`. */
type Known = { contact: Contact; body: string } | { contact: Contact; change: number }

type Pending = { status: 201 | 200; changed: boolean; known: Known } | { status: 204 } | { error: AppError }

export async function runOperations(
  trx: Trx,
  scope: OperationsScope,
  operations: readonly ContactOperation[],
): Promise<OperationResult[]> {
  const { tenant, now } = scope
  const accountId = tenant.id
  const { contacts, owners } = await readTargets(trx, scope, operations)
  const creates = operations.some((o) => o.op === 'create' || o.op === 'upsert')
  let count = creates && Number.isFinite(scope.maxContacts) ? await contactCount(trx, accountId) : 0
  const changes: ContactChange[] = []

  const ownerOf = (email: string | null) => (email === null ? undefined : (owners.get(emailKey(email)) ?? undefined))
  const record = (change: ContactChange, contact: Contact): Known => {
    changes.push(change)
    return { contact, change: changes.length - 1 }
  }
  const create = (input: ContactInput): Pending => {
    const contact = applyContactInput(emptyContact(newId('contact'), now, tenant.livemode), input, now)
    const owner = ownerOf(contact.email)
    if (owner !== undefined) {
      return { error: contactExists(owner) }
    }
    if (count >= scope.maxContacts) {
      return { error: quotaExceeded(tenant, scope.maxContacts) }
    }
    count++
    const known = record({ type: 'create', contact }, contact)
    contacts.set(contact.id, known)
    if (contact.email !== null) {
      owners.set(emailKey(contact.email), contact.id)
    }
    return { status: 201, changed: true, known }
  }
  const update = (current: Known, input: ContactInput, replaceCustomFields = false): Pending => {
    const before = current.contact
    const after = applyContactInput(before, replaceCustomFields ? replacing(before, input) : input, now)
    if (after === before) {
      return { status: 200, changed: false, known: current }
    }
    const owner = ownerOf(after.email)
    if (owner !== undefined && owner !== after.id) {
      return { error: contactExists(owner) }
    }
    if (before.email !== null) {
      owners.set(emailKey(before.email), null)
    }
    if (after.email !== null) {
      owners.set(emailKey(after.email), after.id)
    }
    const known = record({ type: 'update', before, after }, after)
    contacts.set(after.id, known)
    return { status: 200, changed: true, known }
  }
  const decide = (operation: ContactOperation): Pending => {
    switch (operation.op) {
      case 'refused':
        return { error: operation.error }
      case 'create':
        return create(operation.input)
      case 'upsert': {
        const owner = ownerOf(operation.input.email)
        const current = owner === undefined ? undefined : contacts.get(owner)
        return current ? update(current, operation.input, operation.replaceCustomFields) : create(operation.input)
      }
      case 'update': {
        const current = contacts.get(operation.id)
        return current ? update(current, operation.input) : { error: notFound() }
      }
      case 'delete': {
        const current = contacts.get(operation.id)
        if (!current) {
          return { error: notFound() }
        }
        changes.push({ type: 'delete', id: operation.id })
        contacts.delete(operation.id)
        if (current.contact.email !== null) {
          owners.set(emailKey(current.contact.email), null)
        }
        count--
        return { status: 204 }
      }
    }
  }

  const pending = operations.map((operation): Pending => {
    try {
      return decide(operation)
    } catch (error) {
      // The contact rules refuse an input before anything of its operation is decided.
      if (error instanceof AppError) {
        return { error }
      }
      throw error
    }
  })
  const written = await writeContacts(trx, { accountId, shard: scope.shard, now }, changes)
  return pending.map((result): OperationResult => {
    if ('error' in result || result.status === 204) {
      return result
    }
    const { known } = result
    const body = 'body' in known ? known.body : (written.bodies[known.change] as string)
    return result.status === 201 ? { status: 201, body } : { status: 200, body, changed: result.changed }
  })
}

/** Replace, not merge: every stored custom field the input does not name is deleted. */
function replacing(current: Contact, input: ContactInput): ContactInput {
  if (!input.custom_fields) {
    return input
  }
  const removed = Object.keys(current.custom_fields).map((key) => [key, null])
  return { ...input, custom_fields: { ...Object.fromEntries(removed), ...input.custom_fields } }
}

const postgres = sqlFor('postgres')
const sqlite = sqlFor('sqlite')

/**
 * The contacts by id, read in id order. On PostgreSQL they are locked (FOR UPDATE: a delete needs
 * no stronger lock later), in one order, so two transactions naming the same contacts do not each
 * hold one the other waits for. SQLite runs one write transaction at a time.
 */
const READ_TARGETS: Record<Dialect, Statement<'account' | 'ids'>> = {
  postgres: postgres`
    select id, body from contacts where account_id = ${'account'} and id = any(${'ids'}::text[])
    order by id for update`,
  sqlite: sqlite`
    select id, body from contacts where account_id = ${'account'} and id in (select value from json_each(${'ids'}))`,
}

/**
 * The contacts the operations name, by id or by email, and the owners of every email they mention
 * (null: free), read before anything is decided.
 */
async function readTargets(
  trx: Trx,
  scope: OperationsScope,
  operations: readonly ContactOperation[],
): Promise<{ contacts: Map<string, Known>; owners: Map<string, string | null> }> {
  const dialect = dialectOf(trx)
  if (scope.serialized && dialect === 'postgres') {
    await sql`select 1 from accounts where id = ${scope.tenant.id} for no key update`.execute(trx)
  }
  const ids = new Set<string>()
  const emails: string[] = []
  for (const operation of operations) {
    if (operation.op === 'update' || operation.op === 'delete') {
      ids.add(operation.id)
    }
    const email = 'input' in operation ? operation.input.email : undefined
    if (typeof email === 'string') {
      emails.push(email)
    }
  }
  const found = await findContactIdsByEmail(trx, scope.tenant.id, emails)
  const owners = new Map<string, string | null>(emails.map((email) => [emailKey(email), null]))
  for (const [key, id] of found) {
    owners.set(key, id)
    ids.add(id)
  }
  const contacts = new Map<string, Known>()
  if (ids.size > 0) {
    const list = [...ids]
    const { rows } = await trx.executeQuery<{ id: string; body: string }>(
      bind(READ_TARGETS[dialect], {
        account: scope.tenant.id,
        ids: dialect === 'postgres' ? list : JSON.stringify(list),
      }),
    )
    for (const { id, body } of rows) {
      contacts.set(id, { contact: parseStoredContact(body), body })
    }
  }
  // Deleted since the lookup by another transaction: its email is free.
  for (const [key, id] of found) {
    if (!contacts.has(id)) {
      owners.set(key, null)
    }
  }
  return { contacts, owners }
}
