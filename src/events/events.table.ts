export interface EventsTable {
  account_id: string
  id: string
  /** The event's place in the feed (src/events/feed-position.ts), with `id` as tie-break. */
  tx_id: number
  type: string
  created_at: string
  /** The event's API representation, serialized (as contacts.body). */
  body: string
}

/** SQLite's counter of feed positions: one row, `events` (src/events/feed-position.ts). */
export interface EventSequenceTable {
  name: string
  last_position: number
}
