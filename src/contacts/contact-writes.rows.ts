// What the dialects' contact writers share: the interface each implements for writeContacts
// (contact-writes.ts), and the rows of a group of changes as parallel arrays.
import type { Trx } from '../db/transaction.js'
import type { NewEvent } from '../events/events.js'
import type { ContactRows } from './contacts.js'
import type { Contact } from './contacts.schemas.js'

/** Who writes, where the count changes go, and the time the events carry. */
export interface WriteScope {
  accountId: string
  /** The count shard of this transaction (contact-count.ts). */
  shard: number
  now: string
}

export interface UpdatePair {
  before: Contact
  after: Contact
  /** The rows of `after`. */
  rows: ContactRows
}

export interface DialectWriter {
  /** Returns the account's count after the creates when the statement learned it. */
  create(trx: Trx, scope: WriteScope, rows: ContactRows[], events: NewEvent[]): Promise<number | undefined>
  update(trx: Trx, scope: WriteScope, pairs: UpdatePair[], events: NewEvent[]): Promise<void>
  /** The deleted contacts' bodies by id; an id the account does not have is absent. */
  remove(trx: Trx, scope: WriteScope, ids: string[], events: NewEvent[]): Promise<Map<string, string>>
}

/** The columns of contact rows as parallel arrays, one element per contact. */
export function contactColumns(rows: ContactRows[]) {
  return {
    ids: rows.map((row) => row.contact.id),
    emails: rows.map((row) => row.contact.email_lower),
    searches: rows.map((row) => row.contact.search),
    createdAt: rows.map((row) => row.contact.created_at),
    updatedAt: rows.map((row) => row.contact.updated_at),
    bodies: rows.map((row) => row.contact.body),
  }
}

/** (value, contact id) pairs in the index's key order, so inserts walk the index forward. */
function indexPairs(pairs: Array<[string, string]>): Array<[string, string]> {
  return pairs.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
}

export const tagPairs = (rows: ContactRows[]) =>
  indexPairs(rows.flatMap((row) => row.tags.map((t): [string, string] => [t.tag, t.contact_id])))
export const termPairs = (rows: ContactRows[]) =>
  indexPairs(rows.flatMap((row) => row.terms.map((t): [string, string] => [t.term, t.contact_id])))

/** The tag or term rows that the changes removed and added (disjoint for each contact). */
export function changedPairs(pairs: UpdatePair[], valuesOf: (contact: Contact) => string[]) {
  const removed: Array<[string, string]> = []
  const added: Array<[string, string]> = []
  for (const { before, after } of pairs) {
    const had = new Set(valuesOf(before))
    const has = new Set(valuesOf(after))
    const id = after.id
    for (const value of had) {
      if (!has.has(value)) {
        removed.push([value, id])
      }
    }
    for (const value of has) {
      if (!had.has(value)) {
        added.push([value, id])
      }
    }
  }
  return { removed: indexPairs(removed), added: indexPairs(added) }
}
export const tagsOf = (contact: Contact): string[] => contact.tags

export const firsts = (pairs: Array<[string, string]>) => pairs.map((pair) => pair[0])
export const seconds = (pairs: Array<[string, string]>) => pairs.map((pair) => pair[1])
