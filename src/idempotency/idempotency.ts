// Idempotency-Key on POST (docs/design.md#idempotency): the first answer is kept and replayed for
// the same key and body. 5xx answers are not kept, so a retry runs again. The oldest answers beyond
// IDEMPOTENCY_KEYS_PER_ACCOUNT are evicted rather than new keys refused (docs/api-decisions.md).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Kysely, Transaction } from 'kysely'
import { isUniqueViolation } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import { tenantIdOf } from '../http/auth.js'
import { AppError, invalidParameter } from '../http/errors.js'
import type { Clock } from '../lib/clock.js'
import { seal, sha256Hex, unseal } from '../lib/crypto.js'

const KEEP_MS = 24 * 3600 * 1000
/** A first request still "in flight" after this long died with its process: the key is free again. */
const ABANDONED_MS = 60_000
const SEALED_PREFIX = 'v1.'
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/

export interface IdempotentAnswer {
  status: number
  body: string
  location: string | null
}

interface OwnedKey {
  accountId: string
  key: string
  /** Encrypts the stored answer when sealAnswer was called (it carries a secret). */
  answerKey: Buffer
  sealed?: boolean
  /** Stored by the write's own transaction (answerWithWrite); onSend then has nothing to store. */
  storedWithWrite?: IdempotentAnswer
}

const owned = new WeakMap<FastifyRequest, OwnedKey>()

/**
 * For a request that holds an Idempotency-Key, a function that stores the answer inside the write's
 * transaction: a crash after the commit cannot leave a write whose retry would run it again.
 */
export function answerWithWrite(
  request: FastifyRequest,
): ((trx: Transaction<Database>, answer: IdempotentAnswer) => Promise<void>) | undefined {
  const ownedKey = owned.get(request)
  if (!ownedKey) {
    return undefined
  }
  return async (trx, answer) => {
    await storeAnswer(trx, ownedKey, answer)
    ownedKey.storedWithWrite = answer
  }
}

/** For an answer that carries a secret: it is kept encrypted, so no database dump holds it in clear. */
export function sealAnswer(request: FastifyRequest): void {
  const ownedKey = owned.get(request)
  if (ownedKey) {
    ownedKey.sealed = true
  }
}

export function sendAnswer(reply: FastifyReply, { status, body, location }: IdempotentAnswer): FastifyReply {
  if (location) {
    reply.header('location', location)
  }
  const type = status >= 400 ? 'application/problem+json' : 'application/json'
  return reply.code(status).type(`${type}; charset=utf-8`).send(body)
}

async function storeAnswer(
  db: Kysely<Database>,
  { accountId, key, answerKey, sealed }: OwnedKey,
  { status, body, location }: IdempotentAnswer,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ status, body: sealed ? seal(body, answerKey) : body, location })
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .execute()
}

export interface IdempotencyOptions {
  /** Encrypts the answers sealAnswer marks (deriveKey from SECRET). */
  answerKey: Buffer
  keysPerAccount: number
}

export function installIdempotency(
  scope: FastifyInstance,
  db: Kysely<Database>,
  clock: Clock,
  { answerKey, keysPerAccount }: IdempotencyOptions,
): void {
  const trim = trimmer(db, keysPerAccount)
  const claimKey = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers['idempotency-key']
    if (header === undefined) {
      return
    }
    const key = Array.isArray(header) ? '' : header
    if (!KEY_PATTERN.test(key)) {
      throw invalidParameter('Idempotency-Key', 'must be 1-255 visible ASCII characters, e.g. a UUID')
    }
    const accountId = tenantIdOf(request)
    if (accountId === undefined) {
      return
    }
    const requestHash = sha256Hex(JSON.stringify([request.method, request.url, request.body ?? null]))
    const now = clock.now()

    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await db
          .insertInto('idempotency_keys')
          .values({
            account_id: accountId,
            key,
            request_hash: requestHash,
            status: null,
            body: null,
            location: null,
            created_at: now.toISOString(),
            expires_at: new Date(now.getTime() + KEEP_MS).toISOString(),
          })
          .execute()
        owned.set(request, { accountId, key, answerKey })
        await trim(accountId)
        return
      } catch (error) {
        if (!isUniqueViolation(error)) {
          throw error
        }
      }
      const existing = await db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('key', '=', key)
        .executeTakeFirst()
      if (!existing) {
        continue // deleted meanwhile (expired, or its first request failed): try again
      }
      const abandoned = existing.status === null && now.getTime() - Date.parse(existing.created_at) > ABANDONED_MS
      if (existing.expires_at <= now.toISOString() || abandoned) {
        await deleteKey(db, accountId, key, existing.created_at)
        continue
      }
      if (existing.request_hash !== requestHash) {
        throw new AppError(
          'idempotency_key_reused',
          'This Idempotency-Key was used with a different request; use a new key for a new request.',
        )
      }
      if (existing.status === null) {
        throw new AppError(
          'idempotency_key_in_use',
          'A request with this Idempotency-Key is still being processed; retry shortly.',
          {
            headers: { 'retry-after': '1' },
          },
        )
      }
      reply.header('idempotent-replayed', 'true')
      // A JSON answer starts with `{`; a sealed one is seal's `v1.…`.
      const body = existing.body?.startsWith(SEALED_PREFIX) ? unseal(existing.body, answerKey) : (existing.body ?? '')
      return sendAnswer(reply, {
        status: existing.status,
        // A problem names the request it answers: this one, not the first.
        body: existing.status >= 400 ? JSON.stringify({ ...JSON.parse(body), request_id: request.id }) : body,
        location: existing.location,
      })
    }
    throw new AppError('idempotency_key_in_use', 'This Idempotency-Key is contended; retry shortly.', {
      headers: { 'retry-after': '1' },
    })
  }

  const storeAnswerOf = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const ownedKey = owned.get(request)
    if (!ownedKey) {
      return payload
    }
    owned.delete(request)
    if (reply.statusCode >= 500) {
      await db
        .deleteFrom('idempotency_keys')
        .where('account_id', '=', ownedKey.accountId)
        .where('key', '=', ownedKey.key)
        .execute()
      return payload
    }
    const stored = ownedKey.storedWithWrite
    if (stored && stored.status === reply.statusCode && stored.body === payload) {
      return payload
    }
    // No write (a 4xx), or the transaction that stored an answer rolled back and this is another one.
    const location = reply.getHeader('location')
    await storeAnswer(db, ownedKey, {
      status: reply.statusCode,
      body: typeof payload === 'string' ? payload : '',
      location: typeof location === 'string' ? location : null,
    })
    return payload
  }
  // On the POST routes only, ahead of the route's own hooks (as the scope's hooks ran): the other
  // methods have no Idempotency-Key, and a hook that returns at once still costs their requests.
  scope.addHook('onRoute', (route) => {
    if ([route.method].flat().includes('POST')) {
      route.preHandler = [claimKey, route.preHandler ?? []].flat()
      route.onSend = [storeAnswerOf, route.onSend ?? []].flat()
    }
  })
}

async function deleteKey(db: Kysely<Database>, accountId: string, key: string, createdAt: string): Promise<void> {
  // Only the row we looked at: a request that took the key over meanwhile keeps it.
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .where('created_at', '=', createdAt)
    .execute()
}

/**
 * Evicts an account's oldest answered keys beyond `keep`, run after one new key in `every` per account
 * and process (a hundredth of the cap), so an account holds at most `keep + every` per instance. A key
 * whose first request is still running is never evicted. Its cost: docs/api-decisions.md.
 */
function trimmer(db: Kysely<Database>, keep: number): (accountId: string) => Promise<void> {
  const every = Math.max(1, Math.min(100, Math.floor(keep / 100)))
  let inserts = new Map<string, number>()
  return async (accountId) => {
    const count = (inserts.get(accountId) ?? 0) + 1
    if (count < every) {
      // Bounded: a process that met very many accounts starts counting afresh.
      inserts = inserts.size > 100_000 ? new Map() : inserts
      inserts.set(accountId, count)
      return
    }
    inserts.delete(accountId)
    const cut = await db
      .selectFrom('idempotency_keys')
      .select('created_at')
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .limit(1)
      .offset(keep - 1)
      .executeTakeFirst()
    if (cut) {
      await db
        .deleteFrom('idempotency_keys')
        .where('account_id', '=', accountId)
        .where('created_at', '<', cut.created_at)
        .where('status', 'is not', null)
        .execute()
    }
  }
}

export async function purgeExpiredIdempotencyKeys(db: Kysely<Database>, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now.toISOString()).executeTakeFirst()
  return Number(result.numDeletedRows)
}
