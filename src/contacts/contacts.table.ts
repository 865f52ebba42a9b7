export interface ContactsTable {
  account_id: string
  id: string
  /** Lower-cased email: unique per account, serves the `email` filter. */
  email_lower: string | null
  /** "\n"-prefixed lower-cased email, names and company, for the `q` prefix filter. */
  search: string
  created_at: string
  updated_at: string
  /**
   * The contact's API representation, serialized. It is the source of truth; the columns above
   * are derived from it by `toContactRows`, so a page is spliced from strings, not rebuilt.
   */
  body: string
}

export interface ContactTagsTable {
  account_id: string
  tag: string
  contact_id: string
}

/**
 * One row per distinct value of `ContactsTable.search` (collated by code point on PostgreSQL too),
 * so a `q` prefix is a range of this index: a rare prefix is found without walking the account.
 */
export interface ContactTermsTable {
  account_id: string
  term: string
  contact_id: string
}

/** An account's contact count, spread over a few rows (src/contacts/contact-count.ts). */
export interface ContactCountsTable {
  account_id: string
  shard: number
  n: number
}
