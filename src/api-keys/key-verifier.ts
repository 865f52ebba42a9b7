// Verifies bearer keys on the request path: format check, then a short-lived in-memory cache in
// front of the digest lookup, and last-use times and daily request counts written in batches
// off the request path.
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { Clock } from '../lib/clock.js'
import { hashApiKey } from './api-key.js'
import { findKeyByHash, type KeyWithAccount, keyState, recordKeysLastUsed, recordKeyUsage } from './api-keys.store.js'

/**
 * How long a verification is trusted. With a push channel that reaches every instance (Redis,
 * PostgreSQL NOTIFY) revocations arrive at once and the TTL only bounds a lost message: 5 s
 * (DESIGN §5). Without one (SQLite, where the CLI is another process), 1 s keeps the 1 s promise.
 */
export const CACHE_TTL_PUSHED_MS = 5000
export const CACHE_TTL_UNPUSHED_MS = 1000
const CACHE_MAX_ENTRIES = 10_000
/** last_used_at is written at most once a minute per key (DESIGN §5). */
const LAST_USED_RESOLUTION_MS = 60_000
const FLUSH_MS = 5_000

export interface KeyVerifier {
  /** The key's account and key record when the key is active; undefined otherwise. */
  verify(key: string): Promise<KeyWithAccount | undefined>
  /** Forget a key at once (after a revocation through this process). */
  invalidate(keyHash: string): void
  /** Write pending last-use times and request counts now (tests, shutdown). */
  flush(): Promise<void>
  close(): Promise<void>
}

export function createKeyVerifier(db: Kysely<Database>, clock: Clock, prefix: string, cacheTtlMs: number): KeyVerifier {
  const cache = new Map<string, { found: KeyWithAccount; loadedAt: number }>()
  const lastUsedWritten = new Map<string, number>()
  let pendingUses = new Map<string, { accountId: string; keyId: string; at: string }>()
  let pendingCounts = new Map<string, { accountId: string; keyId: string; day: string; requests: number }>()

  /**
   * Lookups in flight, shared by the requests that arrive meanwhile: when a busy key's entry
   * expires, one query refreshes it instead of one per concurrent request.
   */
  const loading = new Map<string, Promise<KeyWithAccount | undefined>>()
  /** Counts invalidate() calls: a lookup that began before one must not fill the cache. */
  let invalidations = 0

  function lookup(keyHash: string, now: number): Promise<KeyWithAccount | undefined> {
    const cached = cache.get(keyHash)
    if (cached && now - cached.loadedAt < cacheTtlMs) {
      return Promise.resolve(cached.found)
    }
    let pending = loading.get(keyHash)
    if (!pending) {
      const started = load(keyHash, now).finally(() => {
        if (loading.get(keyHash) === started) {
          loading.delete(keyHash)
        }
      })
      loading.set(keyHash, started)
      pending = started
    }
    return pending
  }

  async function load(keyHash: string, now: number): Promise<KeyWithAccount | undefined> {
    const generation = invalidations
    const found = await findKeyByHash(db, keyHash, prefix)
    // Re-inserted at the end, so the insertion order stays oldest-loaded first.
    cache.delete(keyHash)
    if (found && generation === invalidations) {
      if (cache.size >= CACHE_MAX_ENTRIES) {
        // Maps iterate in insertion order: drop the entry loaded longest ago.
        const oldest = cache.keys().next().value
        if (oldest !== undefined) {
          cache.delete(oldest)
        }
      }
      cache.set(keyHash, { found, loadedAt: now })
    }
    return found
  }

  function noteUse(found: KeyWithAccount, now: Date): void {
    const day = now.toISOString().slice(0, 10)
    const countKey = `${found.key.id}|${day}`
    const count = pendingCounts.get(countKey)
    if (count) {
      count.requests++
    } else {
      pendingCounts.set(countKey, { accountId: found.account.id, keyId: found.key.id, day, requests: 1 })
    }
    const last = lastUsedWritten.get(found.key.id) ?? 0
    if (now.getTime() - last >= LAST_USED_RESOLUTION_MS) {
      lastUsedWritten.set(found.key.id, now.getTime())
      pendingUses.set(found.key.id, { accountId: found.account.id, keyId: found.key.id, at: now.toISOString() })
    }
  }

  async function flush(): Promise<void> {
    const stale = clock.now().getTime() - LAST_USED_RESOLUTION_MS
    for (const [keyId, at] of lastUsedWritten) {
      if (at < stale) {
        lastUsedWritten.delete(keyId)
      }
    }
    const uses = [...pendingUses.values()]
    const counts = [...pendingCounts.values()]
    pendingUses = new Map()
    pendingCounts = new Map()
    if (uses.length > 0) {
      await recordKeysLastUsed(db, uses)
    }
    if (counts.length > 0) {
      await recordKeyUsage(db, counts)
    }
  }

  const timer = setInterval(() => {
    flush().catch(() => {
      // Best effort: usage figures are for people reading a chart, not for billing.
    })
  }, FLUSH_MS)
  timer.unref()

  return {
    async verify(key) {
      const now = clock.now()
      const found = await lookup(hashApiKey(key), now.getTime())
      if (!found || keyState(found.key, now) !== 'active') {
        return undefined
      }
      noteUse(found, now)
      return found
    },
    invalidate(keyHash) {
      invalidations++
      cache.delete(keyHash)
      // A request from now on must not join a lookup that may have read the key before its revocation.
      loading.delete(keyHash)
    },
    flush,
    async close() {
      clearInterval(timer)
      await flush()
    },
  }
}
