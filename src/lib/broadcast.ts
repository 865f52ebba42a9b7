// Telling every instance something, on one channel: Redis pub/sub, else PostgreSQL LISTEN/NOTIFY,
// else this process only. Each message also reaches this process at once. LISTEN needs a session of
// its own, one per process for every channel: behind a transaction pooler, DATABASE_DIRECT_URL
// (docs/design.md#authentication).
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
 * One LISTEN connection per process, for every channel: each is a connection of the server's
 * `max_connections` that no pool shares. Re-opened when lost; each channel's user bounds what it
 * misses meanwhile (a cache TTL, a re-check).
 */
export interface PostgresListener {
  on(channel: string, onMessage: OnMessage): void
  start(): Promise<void>
  close(): Promise<void>
}

export function postgresListener(url: string): PostgresListener {
  const channels = new Map<string, OnMessage>()
  let client: pg.Client | undefined
  let stopped = false

  async function connect(): Promise<void> {
    const next = new pg.Client({ connectionString: url })
    next.on('notification', (message) => {
      if (message.payload) {
        channels.get(message.channel)?.(message.payload)
      }
    })
    next.on('error', () => {
      client = undefined
      next.end().catch(() => {})
      if (!stopped) {
        setTimeout(() => connect().catch(() => {}), 1000).unref()
      }
    })
    await next.connect()
    for (const channel of channels.keys()) {
      await next.query(`listen ${channel}`)
    }
    client = next
  }

  return {
    on(channel, onMessage) {
      channels.set(channel, onMessage)
    },
    start: connect,
    async close() {
      stopped = true
      await client?.end().catch(() => {})
    },
  }
}

/**
 * NOTIFY through `db` (fine through a pooler); heard through the process's `listener`. Without one
 * (behind a pooler with no direct URL) this instance tells the others but hears nothing: `shared` is
 * false. The listener is started and closed by its owner, once for all its channels.
 */
export function postgresBroadcast(
  listener: PostgresListener | undefined,
  db: Kysely<Database>,
  channel: string,
  onMessage: OnMessage,
): Broadcast {
  listener?.on(channel, onMessage)
  return {
    shared: listener !== undefined,
    async publish(message) {
      onMessage(message)
      return sent(sql`select pg_notify(${channel}, ${message})`.execute(db))
    },
    async start() {},
    async close() {},
  }
}
