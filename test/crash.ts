// Durability under a crash: a real `serve` process takes concurrent creates and updates, is killed
// with SIGKILL at a random moment, and is restarted. Every write acknowledged with 2xx must be there,
// whole (GET returns the acknowledged body), with its event; a write whose outcome the client never
// learned is either entirely there or entirely absent; SQLite's integrity_check is ok after each kill.
// Creates carry an Idempotency-Key: an acknowledged one replays its answer after the restart, and an
// unanswered one is retried with its key as a client would (the counts of keys the kill left "in
// flight" are printed: never one whose write committed, see the last test).
// Runs on SQLite (crash.sqlite.test.ts), and on the PostgreSQL server when TEST_DATABASE_URL is set
// (crash.postgres.test.ts, in a throwaway schema): one file per database, so the two run on two workers.
// CRASH_ROUNDS sets the number of kill rounds per database (default 5).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { testDialects } from './dialects.js'
import { createThrowawaySchema } from './harness.js'
import { freePort, type ServerProcess, startServerProcess } from './processes.js'

const ROUNDS = Number(process.env.CRASH_ROUNDS ?? 5)
const WRITERS = 6
const TEST_SECRET = 'crash-test-secret-0123456789abcdef0123456789'

type Contact = Record<string, unknown> & { id: string; email: string; first_name: string; updated_at: string }

/** A contact the client knows of: its last acknowledged body, and the update in flight when the server died. */
interface Tracked {
  acked: Contact
  inflight?: { first_name: string; n: number }
}

type CreateBody = { email: string; first_name: string; tags: string[]; custom_fields: Record<string, number> }

/** A create (with its Idempotency-Key) whose answer never came: it may or may not have happened, but never in part. */
interface UnknownCreate {
  key: string
  body: CreateBody
}

/** An acknowledged create: after the restart, the same key and body must replay the same answer. */
interface KeyedCreate {
  key: string
  body: CreateBody
  answer: string
}

/** The kill -9 suite on one database; a no-op (reported as skipped) when TEST_DIALECTS leaves it out. */
export function describeCrashTest(dialect: 'sqlite' | 'postgres'): void {
  if (!testDialects().includes(dialect)) {
    describe.skip(`crash test on ${dialect} (not in TEST_DIALECTS, or no TEST_DATABASE_URL)`, () => {
      it('is skipped', () => {})
    })
    return
  }
  describe(`crash test on ${dialect}: kill -9 under concurrent writes, restart`, () => {
    crashSuite(dialect)
  })
}

function crashSuite(dialect: 'sqlite' | 'postgres'): void {
  let base = ''
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-crash-'))
  const sqliteFile = path.join(dir, 'contacts.sqlite')
  let dropSchema: (() => Promise<void>) | undefined
  let env: Record<string, string | undefined>
  let server: ServerProcess | undefined
  let key = ''

  beforeAll(async () => {
    // The same port at every restart, as a client would expect.
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    env = {
      PORT: String(port),
      LOG_LEVEL: 'warn',
      // This suite measures durability, not the rate limiter: 0 turns limiting off (README.md#configuration).
      RATE_LIMIT_PER_SECOND: '0',
      RATE_LIMIT_BURST: '0',
    }
    if (dialect === 'sqlite') {
      env.DATABASE_URL = `sqlite:${sqliteFile}`
    } else {
      const schema = await createThrowawaySchema('crash')
      dropSchema = schema.drop
      Object.assign(env, schema.env)
      env.SECRET = TEST_SECRET
    }
    await startServer()
    const out: string[] = []
    const code = await runCli(
      ['accounts', 'create', '--name', 'Crash', '--json'],
      { ...process.env, ...env },
      {
        out: (text) => out.push(text),
        err: (text) => out.push(text),
      },
    )
    expect(code, out.join('\n')).toBe(0)
    key = JSON.parse(out[0] ?? '{}').api_key.secret
  })

  afterAll(async () => {
    await server?.stop('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
    await dropSchema?.()
  })

  /** Starts `serve` as a user runs it, on the same port each time; resolves once it listens. */
  async function startServer(): Promise<void> {
    server = await startServerProcess(env)
  }

  async function killServer(): Promise<void> {
    const child = server?.child
    if (!server || !child || child.exitCode !== null || child.signalCode !== null) {
      throw new Error('the server is not running')
    }
    await server.stop('SIGKILL')
    expect(child.signalCode).toBe('SIGKILL')
    server = undefined
  }

  const api = (method: string, url: string, body?: unknown, idempotencyKey?: string) =>
    fetch(`${base}/api/v1${url}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(15_000),
    })

  /** A read after the restart; retried once, since a pooled connection may still point at the killed process. */
  const read = (url: string) => api('GET', url).catch(() => api('GET', url))

  async function walk(list: 'contacts' | 'events', query = ''): Promise<Array<Record<string, unknown>>> {
    const items: Array<Record<string, unknown>> = []
    let after: string | null = null
    do {
      const params = new URLSearchParams(query)
      params.set('limit', '100')
      if (after !== null) {
        params.set('after', after)
      }
      const res = await read(`/${list}?${params}`)
      expect(res.status).toBe(200)
      const page = (await res.json()) as Record<string, unknown> & { next_cursor: string | null }
      const pageItems = page[list] as Array<Record<string, unknown>>
      items.push(...pageItems)
      // The events feed's cursor never ends: its end is its first page short of the limit.
      after = list === 'events' && pageItems.length < 100 ? null : page.next_cursor
    } while (after !== null)
    return items
  }

  it(`keeps every acknowledged write through ${ROUNDS} kill -9 rounds`, {
    timeout: 60_000 + ROUNDS * 20_000,
  }, async () => {
    const tracked = new Map<string, Tracked>()
    /** Every body the API acknowledged (creates and updates): each must have its event. */
    const acknowledged: string[] = []
    const unknownCreates: UnknownCreate[] = []
    const tally = {
      creates: 0,
      updates: 0,
      unknown: 0,
      unknownApplied: 0,
      replayed: 0,
      retried: 0,
      stuckKeys: 0,
      unexpected: [] as string[],
    }

    for (let round = 1; round <= ROUNDS; round++) {
      if (!server) {
        await startServer()
      }
      let stop = false
      let ackedThisRound = 0
      const touched = new Set<string>()
      const keyedCreates: KeyedCreate[] = []

      const writer = async (w: number) => {
        const mine: string[] = []
        for (let n = 0; !stop; n++) {
          const target =
            mine.length > 0 && Math.random() < 0.3 ? mine[Math.floor(Math.random() * mine.length)] : undefined
          if (target !== undefined) {
            const entry = tracked.get(target) as Tracked
            const change = { first_name: `r${round}-w${w}-v${n}`, n }
            entry.inflight = change
            let res: Response
            try {
              res = await api('PATCH', `/contacts/${target}`, { first_name: change.first_name, custom_fields: { n } })
            } catch {
              return // the server is gone: this update's outcome is unknown
            }
            const text = await res.text().catch(() => undefined)
            if (res.status === 200 && text === undefined) {
              return // the answer was cut off by the kill: the outcome is unknown
            }
            if (res.status === 200 && text !== undefined) {
              entry.acked = JSON.parse(text) as Contact
              entry.inflight = undefined
              acknowledged.push(JSON.stringify(entry.acked))
              tally.updates++
              ackedThisRound++
            } else {
              entry.inflight = undefined // refused: nothing changed
              if (res.status !== 429 && res.status !== 503) {
                tally.unexpected.push(`PATCH ${res.status} ${text}`)
              }
            }
          } else {
            const body: CreateBody = {
              email: `r${round}-w${w}-${n}@crash.example`,
              first_name: `r${round}-w${w}-v${n}`,
              tags: ['crash', `w${w}`],
              custom_fields: { round, n },
            }
            const idempotencyKey = `crash-${round}-${w}-${n}`
            let res: Response
            try {
              res = await api('POST', '/contacts', body, idempotencyKey)
            } catch {
              unknownCreates.push({ key: idempotencyKey, body })
              return
            }
            const text = await res.text().catch(() => undefined)
            if (res.status === 201 && text !== undefined) {
              keyedCreates.push({ key: idempotencyKey, body, answer: text })
              const contact = JSON.parse(text) as Contact
              tracked.set(contact.id, { acked: contact })
              touched.add(contact.id)
              mine.push(contact.id)
              acknowledged.push(JSON.stringify(contact))
              tally.creates++
              ackedThisRound++
            } else if (res.status === 201) {
              unknownCreates.push({ key: idempotencyKey, body }) // the body was cut off by the kill
            } else if (res.status !== 429 && res.status !== 503) {
              tally.unexpected.push(`POST ${res.status} ${text}`)
            }
          }
        }
      }

      const writers = Array.from({ length: WRITERS }, (_, w) => writer(w))
      // Kill at a random moment once writes are flowing: 0-400 ms after the 5th acknowledgement.
      const started = Date.now()
      while (ackedThisRound < 5 && Date.now() - started < 10_000) {
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 400))
      await killServer()
      stop = true
      await Promise.all(writers)
      expect(tally.unexpected, 'responses other than 2xx, 429 or 503').toEqual([])
      expect(ackedThisRound, 'writes were acknowledged before the kill').toBeGreaterThan(0)

      if (dialect === 'sqlite') {
        // Opening the file runs WAL recovery, as the restarted server will.
        const db = new SQLite(sqliteFile)
        try {
          expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
          expect(db.pragma('foreign_key_check')).toEqual([])
        } finally {
          db.close()
        }
      }

      await startServer()

      // Every contact created or updated in this round: the last acknowledged body, or (for an
      // update in flight at the kill) that update applied whole.
      for (const [id, entry] of tracked) {
        if (!touched.has(id) && entry.inflight === undefined) {
          continue
        }
        const res = await read(`/contacts/${id}`)
        expect(res.status, `acknowledged contact ${id} is missing`).toBe(200)
        const found = (await res.json()) as Contact
        if (entry.inflight && found.first_name === entry.inflight.first_name) {
          const { first_name, updated_at, custom_fields, ...rest } = found
          const { first_name: _f, updated_at: _u, custom_fields: ackedFields, ...ackedRest } = entry.acked
          expect(rest).toEqual(ackedRest)
          expect(custom_fields).toEqual({ ...(ackedFields as object), n: entry.inflight.n })
          expect(updated_at >= entry.acked.updated_at).toBe(true)
          entry.acked = found
          acknowledged.push(JSON.stringify(found)) // it happened, so its event must exist too
          tally.unknownApplied++
        } else {
          expect(found).toEqual(entry.acked)
        }
        if (entry.inflight) {
          tally.unknown++
          entry.inflight = undefined
        }
      }
      // An acknowledged create's Idempotency-Key survived too: the same request replays the same answer.
      for (const { key: idempotencyKey, body, answer } of keyedCreates) {
        const res = await api('POST', '/contacts', body, idempotencyKey)
        expect({ status: res.status, body: await res.text() }).toEqual({ status: 201, body: answer })
        expect(res.headers.get('idempotent-replayed')).toBe('true')
        tally.replayed++
      }
      // Creates whose answer never came: absent, or present exactly as sent. Then the client retries
      // with the same key, as a client of an idempotent API does.
      for (const { key: idempotencyKey, body } of unknownCreates.splice(0)) {
        tally.unknown++
        const lookup = async () => {
          const matches = await walk('contacts', new URLSearchParams({ email: body.email }).toString())
          expect(matches.length).toBeLessThanOrEqual(1)
          return matches[0] as Contact | undefined
        }
        const found = await lookup()
        if (found) {
          expect(found).toMatchObject({ ...body, phone: null, last_name: null })
          tracked.set(found.id, { acked: found })
          acknowledged.push(JSON.stringify(found))
          tally.unknownApplied++
        }
        const retry = await api('POST', '/contacts', body, idempotencyKey)
        const text = await retry.text()
        tally.retried++
        if (retry.status === 409 && JSON.parse(text).code === 'idempotency_key_in_use') {
          // The kill left the key "in flight": refused until it counts as abandoned (60 s).
          // Only a write that never committed: one that did stored its answer in the same transaction.
          tally.stuckKeys++
          expect(found, 'a committed create whose Idempotency-Key has no stored answer').toBeUndefined()
          continue
        }
        expect(retry.status, text).toBe(201)
        const contact = JSON.parse(text) as Contact
        if (found) {
          // The first request committed and stored its answer: the retry is its replay.
          expect(retry.headers.get('idempotent-replayed')).toBe('true')
          expect(contact).toEqual(found)
        } else {
          // It never ran: the retry creates the contact, once.
          expect(retry.headers.get('idempotent-replayed')).toBeNull()
          expect(await lookup()).toEqual(contact)
          tracked.set(contact.id, { acked: contact })
          acknowledged.push(JSON.stringify(contact))
        }
      }
    }

    // The whole database against what the clients know: no acknowledged contact lost, nothing unknown
    // appeared, and every acknowledged change has its event (outbox, same transaction).
    const contacts = await walk('contacts')
    expect(contacts.length).toBe(tracked.size)
    for (const contact of contacts) {
      expect(contact).toEqual(tracked.get(contact.id as string)?.acked)
    }
    // On PostgreSQL the feed serves an event once every transaction begun before it has ended, and
    // transaction ids are server-wide: another suite's open transaction can hold the feed back for a
    // moment (docs/api-decisions.md). A lagging feed completes; an event lost for good still fails.
    const missingEvents = async () => {
      const events = new Set(
        (await walk('events')).map((event) => JSON.stringify((event.data as { object: unknown }).object)),
      )
      return acknowledged.filter((body) => !events.has(JSON.stringify(JSON.parse(body))))
    }
    let missing = await missingEvents()
    for (const deadline = Date.now() + 10_000; missing.length > 0 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      missing = await missingEvents()
    }
    expect(missing, 'acknowledged writes without their event').toEqual([])

    const checked = tally.creates + tally.updates
    console.log(
      `crash test on ${dialect}: ${ROUNDS} rounds, ${checked} acknowledged writes checked ` +
        `(${tally.creates} creates, ${tally.updates} updates; ${tally.replayed} idempotent replays), ` +
        `${tally.unknown} with unknown outcome (${tally.unknownApplied} applied whole, ` +
        `${tally.unknown - tally.unknownApplied} absent; ${tally.retried} retried, ${tally.stuckKeys} keys left in flight, ` +
        'none of them committed)' +
        (dialect === 'sqlite' ? ', integrity_check ok after every kill' : ''),
    )
  })
}
