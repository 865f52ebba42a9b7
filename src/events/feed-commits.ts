// Commits to the events feed, told to whoever waits for them: this process's long polls at once;
// every few milliseconds, in one message, the other instances (their long polls and delivery
// workers) and this process's delivery worker. A worker that hears nothing still polls.
import { randomBytes } from 'node:crypto'
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
  /** A message of the broadcast: another instance's commits (this one's own are ignored). */
  received(message: string): void
  /** Calls `listener` after each batch of commits, this process's or another's. */
  onBatch(listener: () => void): void
  close(): Promise<void>
}

export function createFeedCommits(feedSignal: FeedSignal): FeedCommits & { connect(broadcast: Broadcast): void } {
  const listeners: Array<() => void> = []
  // A message names its instance: this one's own, echoed back by the broadcast, was handled at commit.
  const origin = randomBytes(6).toString('hex')
  let broadcast: Broadcast | undefined
  let pending: Set<string> | undefined
  const flush = () => {
    const tenants = [...(pending ?? [])]
    pending = undefined
    if (broadcast?.shared) {
      for (let at = 0; at < tenants.length; at += TENANTS_PER_MESSAGE) {
        void broadcast.publish(`${origin} ${tenants.slice(at, at + TENANTS_PER_MESSAGE).join(',')}`)
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
      const [from, tenants = ''] = message.split(' ')
      if (from === origin) {
        return
      }
      for (const tenantId of tenants.split(',')) {
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
