// Telling every instance something, on one channel: Redis pub/sub, else PostgreSQL LISTEN/NOTIFY,
// else this process only. Each message also reaches this process at once. LISTEN needs a session of
// its own: behind a transaction pooler, DATABASE_DIRECT_URL (docs/design.md#authentication).
import type { Redis } from 'ioredis'
import { type Kysely, sql } from 'kysely'
import pg from 'pg'
import type { Database } from '../db/schema.js'

export interface Broadcast {
  /** True when every instance hears publish(); false when only this one does. */
  readonly shared: boolean
  /** Best effort: false when the message could not be sent to the others (this process has it). */
  publish(message: string): Promise<boolean>
  /** Connects the listening side (before serving). */
  start(): Promise<void>
  close(): Promise<void>
}

type OnMessage = (message: string) => void

const sent = (push: Promise<unknown>): Promise<boolean> =>
  push.then(
    () => true,
    () => false,
  )

export function localBroadcast(onMessage: OnMessage): Broadcast {
  return {
    shared: false,
    async publish(message) {
      onMessage(message)
      return true
    },
    async start() {},
    async close() {},
  }
}

export function redisBroadcast(redis: Redis, channel: string, onMessage: OnMessage): Broadcast {
  const subscriber = redis.duplicate({ enableOfflineQueue: true })
  subscriber.on('message', (_channel: string, message: string) => onMessage(message))
  subscriber.on('error', () => {
    // Reconnects by itself; what it misses meanwhile, each channel's user bounds (a TTL, a re-check).
  })
  return {
    shared: true,
    async publish(message) {
      onMessage(message)
      return sent(redis.publish(channel, message))
    },
    async start() {
      await subscriber.subscribe(channel)
    },
    async close() {
      subscriber.disconnect()
    },
  }
}

/**
 * NOTIFY through `db` (fine through a pooler), LISTEN on its own connection to `listenUrl`. Without
 * one this instance tells the others but hears nothing: `shared` is false.
 */
export function postgresBroadcast(
  listenUrl: string | undefined,
  db: Kysely<Database>,
  channel: string,
  onMessage: OnMessage,
): Broadcast {
  let listener: pg.Client | undefined
  let stopped = false

  async function listen(url: string): Promise<void> {
    const client = new pg.Client({ connectionString: url })
    client.on('notification', (message) => {
      if (message.payload) {
        onMessage(message.payload)
      }
    })
    client.on('error', () => {
      // A lost LISTEN connection is re-opened; each channel's user bounds what it misses meanwhile.
      listener = undefined
      client.end().catch(() => {})
      if (!stopped) {
        setTimeout(() => listen(url).catch(() => {}), 1000).unref()
      }
    })
    await client.connect()
    await client.query(`listen ${channel}`)
    listener = client
  }

  return {
    shared: listenUrl !== undefined,
    async publish(message) {
      onMessage(message)
      return sent(sql`select pg_notify(${channel}, ${message})`.execute(db))
    },
    start: () => (listenUrl === undefined ? Promise.resolve() : listen(listenUrl)),
    async close() {
      stopped = true
      await listener?.end().catch(() => {})
    },
  }
}
