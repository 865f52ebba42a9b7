/**
 * Up to CHUNK_ENTRIES_MAX of one tenant's request log entries (src/request-logs/request-log-chunk.ts): no
 * two entries of a chunk are further apart in time than CHUNK_SPAN_MS.
 */
export interface RequestLogChunksTable {
  account_id: string
  /** The newest entry's Request-Id. */
  last_id: string
  first_id: string
  entry_count: number
  /** JSON: the entries in the order they were recorded (request-log-chunk.ts). */
  entries: string
}

/** Requests a tenant made on one UTC day: past REQUEST_LOG_MAX_PER_DAY they are counted, not stored. */
export interface RequestLogDaysTable {
  account_id: string
  /** `YYYY-MM-DD`, UTC. */
  day: string
  received: number
}
