// Telling every instance that a key was revoked or rolled out: Redis pub/sub, else PostgreSQL
// LISTEN/NOTIFY, else in-process (docs/design.md#authentication). LISTEN needs a session of its own:
// behind a transaction pooler, DATABASE_DIRECT_URL.
import type { Redis } from 'ioredis'
import { type Kysely, sql } from 'kysely'
import pg from 'pg'
import type { Database } from '../db/schema.js'

const CHANNEL = 'contacts_api_key_revoked'

export interface KeyRevocations {
  /** True when every instance hears publish(): the verification cache may then live longer. */
  readonly shared: boolean
  /**
   * Drops the key from every instance's cache. Best effort: false when the push could not be sent;
   * the revocation is committed and the cache TTL bounds the delay, so the request does not fail.
   */
  publish(keyHash: string): Promise<boolean>
  /** Connects the listening side (before serving). */
  start(): Promise<void>
  close(): Promise<void>
}

type OnRevoked = (keyHash: string) => void

const sent = (push: Promise<unknown>): Promise<boolean> =>
  push.then(
    () => true,
    () => false,
  )

export function localRevocations(onRevoked: OnRevoked): KeyRevocations {
  return {
    shared: false,
    async publish(keyHash) {
      onRevoked(keyHash)
      return true
    },
    async start() {},
    async close() {},
  }
}

export function redisRevocations(redis: Redis, onRevoked: OnRevoked): KeyRevocations {
  const subscriber = redis.duplicate({ enableOfflineQueue: true })
  subscriber.on('message', (_channel: string, keyHash: string) => onRevoked(keyHash))
  subscriber.on('error', () => {
    // Reconnects by itself; meanwhile the cache TTL bounds a missed message.
  })
  return {
    shared: true,
    async publish(keyHash) {
      onRevoked(keyHash)
      return sent(redis.publish(CHANNEL, keyHash))
    },
    async start() {
      await subscriber.subscribe(CHANNEL)
    },
    async close() {
      subscriber.disconnect()
    },
  }
}

/**
 * NOTIFY through `db` (fine through a pooler), LISTEN on its own connection to `listenUrl`. Without
 * one this instance tells the others but hears nothing: `shared` is false, so its cache is short.
 */
export function postgresRevocations(
  listenUrl: string | undefined,
  db: Kysely<Database>,
  onRevoked: OnRevoked,
): KeyRevocations {
  let listener: pg.Client | undefined
  let stopped = false

  async function listen(url: string): Promise<void> {
    const client = new pg.Client({ connectionString: url })
    client.on('notification', (message) => {
      if (message.payload) {
        onRevoked(message.payload)
      }
    })
    client.on('error', () => {
      // A lost LISTEN connection is re-opened; the cache TTL covers the gap.
      listener = undefined
      client.end().catch(() => {})
      if (!stopped) {
        setTimeout(() => listen(url).catch(() => {}), 1000).unref()
      }
    })
    await client.connect()
    await client.query(`listen ${CHANNEL}`)
    listener = client
  }

  return {
    shared: listenUrl !== undefined,
    async publish(keyHash) {
      onRevoked(keyHash)
      return sent(sql`select pg_notify(${CHANNEL}, ${keyHash})`.execute(db))
    },
    start: () => (listenUrl === undefined ? Promise.resolve() : listen(listenUrl)),
    async close() {
      stopped = true
      await listener?.end().catch(() => {})
    },
  }
}
