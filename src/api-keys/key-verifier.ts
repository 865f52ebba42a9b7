// Verifies bearer keys: a short-lived in-memory cache in front of the digest lookup; last-use times
// and daily request counts written in batches off the request path.
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { Clock } from '../lib/clock.js'
import { hashApiKey } from './api-key.js'
import { findKeyByHash, type KeyWithAccount, keyState, recordKeysLastUsed, recordKeyUsage } from './api-keys.store.js'

/** How long a verification is trusted, with and without a push channel (docs/design.md#authentication). */
export const CACHE_TTL_PUSHED_MS = 5000
export const CACHE_TTL_UNPUSHED_MS = 1000
const CACHE_MAX_ENTRIES = 10_000
/** last_used_at is written at most once a minute per key (docs/design.md#authentication). */
const LAST_USED_RESOLUTION_MS = 60_000
const FLUSH_MS = 5_000
const DAY_MS = 86_400_000

interface CacheEntry {
  found: KeyWithAccount
  loadedAt: number
  /** Epoch ms from which the key is no longer active (revoked: -Infinity; no expiry: Infinity). */
  activeUntil: number
}

function activeUntil({ key }: KeyWithAccount): number {
  if (key.revoked_at !== null) {
    return Number.NEGATIVE_INFINITY
  }
  if (key.expires_at === null) {
    return Number.POSITIVE_INFINITY
  }
  // An expiry that does not read as a time is not trusted: the key is refused, never let through.
  const at = Date.parse(key.expires_at)
  return Number.isNaN(at) ? Number.NEGATIVE_INFINITY : at
}

/** verifyCached's answer when the key's verification is not cached: call verify(). */
export const NOT_CACHED = Symbol('not cached')

export interface KeyVerifier {
  verify(key: string): Promise<KeyWithAccount | undefined>
  /**
   * verify() without a promise when the key's verification is cached (every request of a busy key);
   * NOT_CACHED when it must be looked up. Takes the key's digest, which a caller may have kept.
   */
  verifyCached(keyHash: string): KeyWithAccount | undefined | typeof NOT_CACHED
  invalidate(keyHash: string): void
  flush(): Promise<void>
  close(): Promise<void>
}

export function createKeyVerifier(db: Kysely<Database>, clock: Clock, prefix: string, cacheTtlMs: number): KeyVerifier {
  const cache = new Map<string, CacheEntry>()
  const lastUsedWritten = new Map<string, number>()
  let pendingUses = new Map<string, { accountId: string; keyId: string; at: string }>()
  let pendingCounts = new Map<string, { accountId: string; keyId: string; day: string; requests: number }>()

  // Lookups in flight, shared: when a busy key's entry expires, one query refreshes it.
  const loading = new Map<string, Promise<KeyWithAccount | undefined>>()
  /** Counts invalidate() calls: a lookup that began before one must not fill the cache. */
  let invalidations = 0

  function fresh(keyHash: string, now: number): CacheEntry | undefined {
    const cached = cache.get(keyHash)
    return cached && now - cached.loadedAt < cacheTtlMs ? cached : undefined
  }

  function lookup(keyHash: string, now: number): Promise<KeyWithAccount | undefined> {
    const cached = fresh(keyHash, now)
    if (cached) {
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
    cache.delete(keyHash)
    if (found && generation === invalidations) {
      if (cache.size >= CACHE_MAX_ENTRIES) {
        // Maps iterate in insertion order: drop the entry loaded longest ago.
        const oldest = cache.keys().next().value
        if (oldest !== undefined) {
          cache.delete(oldest)
        }
      }
      cache.set(keyHash, { found, loadedAt: now, activeUntil: activeUntil(found) })
    }
    return found
  }

  // The UTC day of the request counts, formatted only when the clock enters another day, not per request.
  let day = ''
  let dayStart = 0
  let dayEnd = 0

  function noteUse(found: KeyWithAccount, now: number): void {
    if (now < dayStart || now >= dayEnd) {
      dayStart = now - (now % DAY_MS)
      dayEnd = dayStart + DAY_MS
      day = new Date(dayStart).toISOString().slice(0, 10)
    }
    const countKey = `${found.key.id}|${day}`
    const count = pendingCounts.get(countKey)
    if (count) {
      count.requests++
    } else {
      pendingCounts.set(countKey, { accountId: found.tenant.id, keyId: found.key.id, day, requests: 1 })
    }
    const last = lastUsedWritten.get(found.key.id) ?? 0
    if (now - last >= LAST_USED_RESOLUTION_MS) {
      lastUsedWritten.set(found.key.id, now)
      pendingUses.set(found.key.id, {
        accountId: found.tenant.id,
        keyId: found.key.id,
        at: new Date(now).toISOString(),
      })
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
      noteUse(found, now.getTime())
      return found
    },
    verifyCached(keyHash) {
      const now = clock.now().getTime()
      const cached = fresh(keyHash, now)
      if (!cached) {
        return NOT_CACHED
      }
      if (now >= cached.activeUntil) {
        return undefined
      }
      noteUse(cached.found, now)
      return cached.found
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
