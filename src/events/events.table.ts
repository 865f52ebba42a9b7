export interface EventsTable {
  account_id: string
  id: string
  type: string
  created_at: string
  /** The event's API representation, serialized (as contacts.body). */
  body: string
}
