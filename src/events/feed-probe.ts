// A waiting long poll's cheap question, asked once per tenant however many of its polls wait: has
// anything been written to the tenant's feed past this position? It finds what no signal announces
// (an event committed by another instance) without each poll reading the feed every second.
import type { Db } from '../db/transaction.js'
import { type FeedPosition, parseFeedPosition } from './feed-position.js'

/** How old the shared answer may be. */
export const PROBE_MAX_AGE_MS = 500
/** Tenants remembered at most; the expired are dropped past it. */
const PROBED_TENANTS_MAX = 10_000

export interface FeedProbe {
  /** True when the tenant's newest event (served or not yet) is past `afterId` (a feed position). */
  hasPast(tenantId: string, afterId: string | undefined): Promise<boolean>
}

export function createFeedProbe(db: Db, now: () => number = performance.now.bind(performance)): FeedProbe {
  const newest = new Map<string, { at: number; position: Promise<FeedPosition | undefined> }>()
  const read = async (tenantId: string): Promise<FeedPosition | undefined> => {
    const row = await db
      .selectFrom('events')
      .select(['tx_id', 'id'])
      .where('account_id', '=', tenantId)
      .orderBy('tx_id', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst()
    return row && { txId: row.tx_id, id: row.id }
  }
  return {
    async hasPast(tenantId, afterId) {
      let entry = newest.get(tenantId)
      if (entry === undefined || now() - entry.at > PROBE_MAX_AGE_MS) {
        if (newest.size >= PROBED_TENANTS_MAX) {
          for (const [tenant, old] of newest) {
            if (now() - old.at > PROBE_MAX_AGE_MS) {
              newest.delete(tenant)
            }
          }
        }
        entry = { at: now(), position: read(tenantId) }
        newest.set(tenantId, entry)
        // A failed read is asked again next time, not remembered.
        entry.position.catch(() => newest.delete(tenantId))
      }
      const position = await entry.position
      const after = afterId === undefined ? undefined : parseFeedPosition(afterId)
      return position !== undefined && (after === undefined || isPast(position, after))
    },
  }
}

const isPast = (a: FeedPosition, b: FeedPosition): boolean => a.txId > b.txId || (a.txId === b.txId && a.id > b.id)
