// The same-work baseline of the read scenarios: the least code that does what GET /me and a
// contacts list page do in the database — hash the key, find its account, read one keyset page of
// the stored contact bodies — with the same driver and settings, then writes the envelope with
// node:http. No framework, no validation, no rate limit, no log, no metrics. Plain JavaScript, no
// loader. argv: the database URL (sqlite:FILE or postgres://…), the cursor secret, the port.
import { createHash, createHmac, hash, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'
import SQLite from 'better-sqlite3'
import pg from 'pg'

const [url = '', secret = '', port = '0'] = process.argv.slice(2)
const PAGE = 50

const KEY_SQL =
  'select accounts.id, accounts.name, accounts.created_at, api_keys.account_id as tenant from api_keys join accounts on accounts.id = api_keys.account_id where api_keys.key_hash = $1'
const PAGE_SQL = 'select id, body from contacts where account_id = $1 and id > $2 order by id limit $3'

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
    return {
      key: async (hash) => key.get(hash),
      page: async (tenant, after, limit) => page.all(tenant, after, limit),
    }
  }
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  return {
    key: async (hash) => (await pool.query({ name: 'key', text: KEY_SQL, values: [hash] })).rows[0],
    page: async (tenant, after, limit) =>
      (await pool.query({ name: 'page', text: PAGE_SQL, values: [tenant, after, limit] })).rows,
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

function send(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length })
  response.end(body)
}

createServer(async (request, response) => {
  const header = request.headers.authorization ?? ''
  const account = await db.key(createHash('sha256').update(header.slice('Bearer '.length)).digest('hex'))
  if (!account) {
    return send(response, 401, Buffer.from('{"code":"invalid_api_key"}'))
  }
  const [path = '', query = ''] = (request.url ?? '').split('?')
  if (path === '/api/v1/me') {
    const { id, name, created_at } = account
    return send(response, 200, Buffer.from(JSON.stringify({ object: 'account', id, name, created_at })))
  }
  if (path !== '/api/v1/contacts') {
    return send(response, 404, Buffer.from('{"code":"not_found"}'))
  }
  const cursor = new URLSearchParams(query).get('after')
  const after = cursor === null ? '' : afterOf(cursor, account.tenant)
  if (after === undefined) {
    return send(response, 400, Buffer.from('{"code":"invalid_cursor"}'))
  }
  const rows = await db.page(account.tenant, after, PAGE + 1)
  const shown = rows.slice(0, PAGE)
  const last = shown.at(-1)
  const next = rows.length > PAGE && last ? JSON.stringify(cursorOf(account.tenant, last.id)) : 'null'
  send(response, 200, Buffer.from(`{"contacts":[${shown.map((row) => row.body).join(',')}],"next_cursor":${next}}`))
}).listen(Number(port), '127.0.0.1')

// A clean exit on SIGTERM, so `--cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0))
