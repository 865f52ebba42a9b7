// client.events.follow: the events feed as an endless async iterator, long-polling at its end
// (GET /events?wait=), resumable from a stored cursor.
import { itemsOf, type WithLastResponse } from './last-response.js'
import type { Event, EventPage, ListEventsQuery } from './types.js'

export interface FollowOptions {
  /** A `cursor` stored earlier: go on from there. Without it, only events committed from now on. */
  after?: string
  type?: ListEventsQuery['type']
  /** Events per request (1–100, default 100). */
  limit?: number
  /** Seconds each request waits at the end of the feed (0–30, default 30). */
  wait?: number
  /** Ends the iteration (a request under way is aborted). */
  signal?: AbortSignal
}

/** Each event with the answer of the page it came in as `lastResponse`. */
export interface EventFollower extends AsyncIterableIterator<WithLastResponse<Event>> {
  /**
   * Where to resume: after the last page whose events were all yielded. Store it and pass it as
   * `after`; events of a page left part-way come again, so a consumer checks `id`s (it must anyway:
   * webhooks and retries repeat events too).
   */
  readonly cursor: string | undefined
}

type ListEvents = (query: ListEventsQuery, init: { signal?: AbortSignal }) => Promise<WithLastResponse<EventPage>>

export function followEvents(list: ListEvents, options: FollowOptions = {}): EventFollower {
  const { after, type, limit = 100, wait = 30, signal } = options
  let cursor = after
  async function* run(): AsyncGenerator<WithLastResponse<Event>, undefined, undefined> {
    const init = signal ? { signal } : {}
    const filters = type === undefined ? {} : { type }
    if (cursor === undefined) {
      cursor = (await list({ ...filters, from: 'now' }, init)).next_cursor ?? undefined
    }
    while (!signal?.aborted) {
      const page = await list({ ...filters, limit, wait, ...(cursor ? { after: cursor } : {}) }, init)
      yield* itemsOf(page.events, page)
      // The feed's cursor is never null; a server of an older release could still end a feed with one.
      cursor = page.next_cursor ?? cursor
    }
    return undefined
  }
  // A getter, read each time: Object.assign would copy today's value.
  return Object.defineProperty(run(), 'cursor', { get: () => cursor }) as EventFollower
}
