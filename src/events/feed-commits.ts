// Commits to the events feed, told to whoever waits for them: this process's long polls at once;
// every few milliseconds, in one message, the other instances (their long polls and delivery
// workers) and this process's delivery worker. A worker that hears nothing still polls.
import type { Broadcast } from '../lib/broadcast.js'
import type { FeedSignal } from './feed-signal.js'

export const FEED_CHANNEL = 'contacts_api_feed'
/** Commits within this long make one message, and one wake-up of a worker. */
export const FEED_BATCH_MS = 5
/** Tenant ids per message: PostgreSQL's NOTIFY takes under 8,000 bytes. */
const TENANTS_PER_MESSAGE = 100

export interface FeedCommits {
  /** An event of the tenant was committed by this process. */
  committed(tenantId: string): void
  /** Another instance's message (the broadcast's). */
  received(message: string): void
  /** Calls `listener` after each batch of commits, this process's or another's. */
  onBatch(listener: () => void): void
  close(): Promise<void>
}

export function createFeedCommits(feedSignal: FeedSignal): FeedCommits & { connect(broadcast: Broadcast): void } {
  const listeners: Array<() => void> = []
  let broadcast: Broadcast | undefined
  let pending: Set<string> | undefined
  const flush = () => {
    const tenants = [...(pending ?? [])]
    pending = undefined
    if (broadcast?.shared) {
      for (let at = 0; at < tenants.length; at += TENANTS_PER_MESSAGE) {
        void broadcast.publish(tenants.slice(at, at + TENANTS_PER_MESSAGE).join(','))
      }
    }
    for (const listener of listeners) {
      listener()
    }
  }
  return {
    connect(to) {
      broadcast = to
    },
    committed(tenantId) {
      feedSignal.notify(tenantId)
      if (pending) {
        pending.add(tenantId)
        return
      }
      pending = new Set([tenantId])
      setTimeout(flush, FEED_BATCH_MS).unref()
    },
    received(message) {
      for (const tenantId of message.split(',')) {
        feedSignal.notify(tenantId)
      }
      for (const listener of listeners) {
        listener()
      }
    },
    onBatch(listener) {
      listeners.push(listener)
    },
    async close() {
      await broadcast?.close()
    },
  }
}
