// The same-work baseline: the least code that does what GET /me, a contacts list page, POST
// /contacts and PATCH /contacts/{id} do in the database — hash the key, find its account, read one keyset page of the
// stored contact bodies, or write a contact (new: with its tags, search terms and count) and its
// event in one transaction, the service's statements — with the same driver and settings, then answers with
// node:http. No framework, no validation, no rate limit, no log, no metrics. Plain JavaScript, no
// loader. argv: the database URL (sqlite:FILE or postgres://…), the cursor secret, the port, and
// `fastify` to serve the same work behind a bare Fastify route instead (the framework's own cost).
import { createHash, createHmac, hash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'
import SQLite from 'better-sqlite3'
import pg from 'pg'

const [url = '', secret = '', port = '0', framework = 'node:http'] = process.argv.slice(2)
const PAGE = 50

const KEY_SQL =
  'select accounts.id, accounts.name, accounts.created_at, api_keys.account_id as tenant from api_keys join accounts on accounts.id = api_keys.account_id where api_keys.key_hash = $1'
const PAGE_SQL = 'select id, body from contacts where account_id = $1 and id > $2 order by id limit $3'

// The service's statements for one new contact (src/contacts/contact-writes.*.ts).
const SQLITE_CREATE = [
  'insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body) values (?, ?, ?, ?, ?, ?, ?)',
  'insert into contact_counts (account_id, shard, n) values (?, ?, 1) on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n',
  'insert into contact_tags (account_id, tag, contact_id) select ?, value ->> 0, value ->> 1 from json_each(?)',
  'insert into contact_terms (account_id, term, contact_id) select ?, value ->> 0, value ->> 1 from json_each(?)',
  "update event_sequence set last_position = last_position + 1 where name = 'events' returning last_position",
  'insert into events (account_id, id, tx_id, type, created_at, body) values (?, ?, ?, ?, ?, ?)',
  'select sum(n) as n from contact_counts where account_id = ?',
]
// And for a change of one contact: its row read under the write lock, written back, its event.
const LOCK_READ = 'update contacts set body = body where account_id = $1 and id = $2 returning body'
const SQLITE_UPDATE = [
  LOCK_READ.replace('$1', '?').replace('$2', '?'),
  'update contacts set email_lower = ?, search = ?, updated_at = ?, body = ? where account_id = ? and id = ?',
  "update event_sequence set last_position = last_position + 1 where name = 'events' returning last_position",
  'insert into events (account_id, id, tx_id, type, created_at, body) values (?, ?, ?, ?, ?, ?)',
]
const POSTGRES_UPDATE = `with contact as (
    update contacts set email_lower = $1, search = $2, updated_at = $3, body = $4
    where account_id = $5 and id = $6
  ), removed_tags as (
    delete from contact_tags where account_id = $5 and contact_id = $6 and tag = any($7::text[])
  ), added_tags as (
    insert into contact_tags (account_id, tag, contact_id) select $5, tag, $6 from unnest($8::text[]) as tag
  ), removed_terms as (
    delete from contact_terms where account_id = $5 and contact_id = $6 and term = any($9::text[])
  ), added_terms as (
    insert into contact_terms (account_id, term, contact_id) select $5, term, $6 from unnest($10::text[]) as term
  )
  insert into events (account_id, id, tx_id, type, created_at, body)
  values ($5, $11, pg_current_xact_id()::text::bigint, 'contact.updated', $3, $12)`
const POSTGRES_CREATE = `with contact as (
    insert into contacts (account_id, id, email_lower, search, created_at, updated_at, body)
    values ($1, $2, $3, $4, $5, $6, $7)
  ), tags as (
    insert into contact_tags (account_id, tag, contact_id) select $1, tag, $2 from unnest($8::text[]) as tag
  ), terms as (
    insert into contact_terms (account_id, term, contact_id) select $1, term, $2 from unnest($9::text[]) as term
  ), counted as (
    insert into contact_counts (account_id, shard, n) values ($1, $10, 1)
    on conflict (account_id, shard) do update set n = contact_counts.n + excluded.n
  ), event as (
    insert into events (account_id, id, tx_id, type, created_at, body)
    values ($1, $11, pg_current_xact_id()::text::bigint, 'contact.created', $5, $12)
  )
  select (coalesce(sum(n), 0) + 1)::bigint as count from contact_counts where account_id = $1`

/** The two statements on the service's driver: [key row, page rows]. */
function database() {
  if (url.startsWith('sqlite:')) {
    const db = new SQLite(url.slice('sqlite:'.length))
    // The service's settings (src/db/database.ts).
    db.pragma('busy_timeout = 5000')
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('cache_size = -4096')
    const key = db.prepare(KEY_SQL.replace('$1', '?'))
    const page = db.prepare(PAGE_SQL.replace('$1', '?').replace('$2', '?').replace('$3', '?'))
    const [contact, count, tags, terms, position, event, total] = SQLITE_CREATE.map((text) => db.prepare(text))
    const create = db.transaction((c) => {
      contact.run(c.tenant, c.id, c.email, c.search, c.now, c.now, c.body)
      count.run(c.tenant, c.shard)
      tags.run(c.tenant, JSON.stringify(c.tags.map((tag) => [tag, c.id])))
      terms.run(c.tenant, JSON.stringify(c.terms.map((term) => [term, c.id])))
      const { last_position } = position.get()
      event.run(c.tenant, c.eventId, last_position, 'contact.created', c.now, c.eventBody)
      total.get(c.tenant)
    })
    const [lockRead, rewrite, position2, event2] = SQLITE_UPDATE.map((text) => db.prepare(text))
    const update = db.transaction((tenant, id, change) => {
      const row = lockRead.get(tenant, id)
      if (!row) {
        return undefined
      }
      const c = change(row.body)
      rewrite.run(c.email, c.search, c.now, c.body, tenant, id)
      const { last_position } = position2.get()
      event2.run(tenant, c.eventId, last_position, 'contact.updated', c.now, c.eventBody)
      return c.body
    })
    return {
      key: async (hash) => key.get(hash),
      page: async (tenant, after, limit) => page.all(tenant, after, limit),
      // BEGIN IMMEDIATE, as the service's writes.
      create: async (c) => create.immediate(c),
      update: async (tenant, id, change) => update.immediate(tenant, id, change),
    }
  }
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  return {
    key: async (hash) => (await pool.query({ name: 'key', text: KEY_SQL, values: [hash] })).rows[0],
    page: async (tenant, after, limit) =>
      (await pool.query({ name: 'page', text: PAGE_SQL, values: [tenant, after, limit] })).rows,
    async update(tenant, id, change) {
      const client = await pool.connect()
      try {
        await client.query('begin')
        const { rows } = await client.query({ name: 'lock-read', text: LOCK_READ, values: [tenant, id] })
        if (rows.length === 0) {
          await client.query('commit')
          return undefined
        }
        const c = change(rows[0].body)
        await client.query({
          name: 'update',
          text: POSTGRES_UPDATE,
          values: [c.email, c.search, c.now, c.body, tenant, id, [], [], [], [], c.eventId, c.eventBody],
        })
        await client.query('commit')
        return c.body
      } catch (error) {
        await client.query('rollback')
        throw error
      } finally {
        client.release()
      }
    },
    async create(c) {
      const client = await pool.connect()
      try {
        await client.query('begin')
        await client.query({
          name: 'create',
          text: POSTGRES_CREATE,
          values: [
            c.tenant,
            c.id,
            c.email,
            c.search,
            c.now,
            c.now,
            c.body,
            c.tags,
            c.terms,
            c.shard,
            c.eventId,
            c.eventBody,
          ],
        })
        await client.query('commit')
      } catch (error) {
        await client.query('rollback')
        throw error
      } finally {
        client.release()
      }
    },
  }
}

const db = database()
// The service's cursor (src/http/pagination.ts): its payload, signed with 128 bits of HMAC-SHA-256.
const sign = (encoded) =>
  createHmac('sha256', secret).update(`cursor.${encoded}`).digest().subarray(0, 16).toString('base64url')
const FILTERS = hash('sha256', JSON.stringify([['order', 'asc']]), 'buffer')
  .subarray(0, 16)
  .toString('base64url')

function cursorOf(tenant, lastId) {
  const encoded = Buffer.from(JSON.stringify({ v: 2, l: 'contacts', a: tenant, f: FILTERS, k: lastId })).toString(
    'base64url',
  )
  return `${encoded}.${sign(encoded)}`
}

/** The last id of the previous page, or undefined for a cursor not signed for this list. */
function afterOf(cursor, tenant) {
  const dot = cursor.indexOf('.')
  const encoded = cursor.slice(0, dot)
  const given = Buffer.from(cursor.slice(dot + 1))
  const expected = Buffer.from(sign(encoded))
  if (dot < 0 || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return undefined
  }
  const payload = JSON.parse(Buffer.from(encoded, 'base64url').toString())
  return payload.a === tenant && payload.l === 'contacts' && payload.f === FILTERS ? payload.k : undefined
}

/** A time-ordered id, as the service's (src/lib/ids.ts): the index takes it at its end. */
let lastTime = 0
let sequence = 0
function newId(prefix) {
  const now = Date.now()
  sequence = now === lastTime ? sequence + 1 : 0
  lastTime = now
  return `${prefix}_${now.toString(32).padStart(10, '0')}${sequence.toString(32).padStart(4, '0')}${randomBytes(6).toString('hex')}`
}

async function bodyOf(request) {
  let text = ''
  for await (const chunk of request) {
    text += chunk
  }
  return text
}

/** Writes the contact with its rows and its event; returns its body. */
async function created(tenant, input) {
  const now = new Date().toISOString()
  const id = newId('con')
  const body = JSON.stringify({ object: 'contact', id, ...input, created_at: now, updated_at: now })
  const eventId = newId('evt')
  const searched = [input.email, input.first_name, input.last_name].filter((value) => typeof value === 'string')
  await db.create({
    tenant,
    id,
    email: String(input.email).toLowerCase(),
    search: searched.join(' ').toLowerCase(),
    now,
    body,
    tags: input.tags ?? [],
    terms: [...new Set(searched.map((value) => value.toLowerCase()))],
    shard: randomInt(64),
    eventId,
    eventBody: `{"object":"event","id":"${eventId}","type":"contact.created","created_at":"${now}","livemode":true,"data":{"object":${body}}}`,
  })
  return body
}

/** The stored contact with the patch applied: its new body, columns and event (tags and terms unchanged). */
function changed(stored, patch) {
  const now = new Date().toISOString()
  const contact = { ...JSON.parse(stored), ...patch, updated_at: now }
  const body = JSON.stringify(contact)
  const eventId = newId('evt')
  const searched = [contact.email, contact.first_name, contact.last_name].filter((value) => typeof value === 'string')
  return {
    email: String(contact.email).toLowerCase(),
    search: searched.join(' ').toLowerCase(),
    now,
    body,
    eventId,
    eventBody: `{"object":"event","id":"${eventId}","type":"contact.updated","created_at":"${now}","livemode":true,"data":{"object":${body}}}`,
  }
}

const JSON_TYPE = 'application/json; charset=utf-8'

function send(response, status, body) {
  response.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': body.length })
  response.end(body)
}

/**
 * One request, answered by `respond(status, body)`; `parsed` is its body when a framework has read
 * it. A failure is a 500 naming its error, so the bench's failed run says why.
 */
async function serve(request, respond, parsed) {
  const header = request.headers.authorization ?? ''
  const account = await db.key(createHash('sha256').update(header.slice('Bearer '.length)).digest('hex'))
  if (!account) {
    return respond(401, Buffer.from('{"code":"invalid_api_key"}'))
  }
  const [path = '', query = ''] = (request.url ?? '').split('?')
  if (request.method === 'PATCH' && path.startsWith('/api/v1/contacts/')) {
    const patch = parsed ?? JSON.parse(await bodyOf(request))
    const body = await db.update(account.tenant, path.slice('/api/v1/contacts/'.length), (stored) =>
      changed(stored, patch),
    )
    return body === undefined ? respond(404, Buffer.from('{"code":"not_found"}')) : respond(200, Buffer.from(body))
  }
  if (request.method === 'POST' && path === '/api/v1/contacts') {
    const input = parsed ?? JSON.parse(await bodyOf(request))
    return respond(201, Buffer.from(await created(account.tenant, input)))
  }
  if (path === '/api/v1/me') {
    const { id, name, created_at } = account
    return respond(200, Buffer.from(JSON.stringify({ object: 'account', id, name, created_at })))
  }
  if (path !== '/api/v1/contacts') {
    return respond(404, Buffer.from('{"code":"not_found"}'))
  }
  const cursor = new URLSearchParams(query).get('after')
  const after = cursor === null ? '' : afterOf(cursor, account.tenant)
  if (after === undefined) {
    return respond(400, Buffer.from('{"code":"invalid_cursor"}'))
  }
  const rows = await db.page(account.tenant, after, PAGE + 1)
  const shown = rows.slice(0, PAGE)
  const last = shown.at(-1)
  const next = rows.length > PAGE && last ? JSON.stringify(cursorOf(account.tenant, last.id)) : 'null'
  respond(200, Buffer.from(`{"contacts":[${shown.map((row) => row.body).join(',')}],"next_cursor":${next}}`))
}

if (framework === 'fastify') {
  const { default: Fastify } = await import('fastify')
  const app = Fastify()
  app.route({
    method: ['GET', 'POST', 'PATCH'],
    url: '/*',
    handler: (request, reply) =>
      serve(request.raw, (status, body) => reply.code(status).type(JSON_TYPE).send(body), request.body),
  })
  await app.listen({ port: Number(port), host: '127.0.0.1' })
} else {
  createServer((request, response) => {
    const respond = (status, body) => send(response, status, body)
    serve(request, respond).catch((error) => respond(500, Buffer.from(JSON.stringify({ error: String(error) }))))
  }).listen(Number(port), '127.0.0.1')
}

// A clean exit on SIGTERM, so `--cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0))
