// The contact scenarios of `npm run bench`, one declarative entry each. To add one, append an entry
// to SCENARIOS (or spread a list exported by a module of your own): bench/run.ts checks it once
// (its status, and `check` on the body), measures it, then measures raw node:http answering with
// the very response it captured (status, headers, body), and prints the ratios.
import { encodeCursor } from '../src/http/pagination.js'
import type { LoadSpec } from './load.js'
import { POLLED_PATH, pollingHeaders } from './scenarios/conditional.js'
import type { SeedResult } from './seed.js'
import { CREATE_BODY, PATCH_BODY } from './template.js'

/** What an entry may use: the seeded data, the server's secret (for cursors), the server, the key. */
export interface ScenarioContext {
  seed: SeedResult
  secret: string
  /** The server's base URL and the big account's authorization header. */
  base: string
  headers: Record<string, string>
}

export interface Scenario {
  name: string
  title: string
  method: LoadSpec['method']
  /** A template (bench/template.ts): `{n}` per request, `{tag}` per run, `{id}` from `ids`. */
  path: string | ((ctx: ScenarioContext) => string)
  /** A JSON body template, or none. */
  body?: string
  /** The status every answer must have (checked once before; wrk counts any ≥ 400 as an error). */
  status: number
  ids?: (ctx: ScenarioContext) => string[]
  /** Headers besides the key (e.g. If-None-Match from a first request, which it may make). */
  headers?: (ctx: ScenarioContext) => Record<string, string> | Promise<Record<string, string>>
  /** Checks the probe's body, so a broken scenario fails loudly instead of measuring errors. */
  check?: (body: string, ctx: ScenarioContext) => string | undefined
}

type Page = { contacts: Array<{ id: string; tags: string[] }>; next_cursor: string | null }

const fullPage =
  (predicate?: (contacts: Page['contacts'], ctx: ScenarioContext) => string | undefined) =>
  (body: string, ctx: ScenarioContext) => {
    const page = JSON.parse(body) as Page
    if (page.contacts.length !== 50 || page.next_cursor === null) {
      return `expected a full page of 50 with a next cursor, got ${page.contacts.length}`
    }
    return predicate?.(page.contacts, ctx)
  }

const deepCursor = (ctx: ScenarioContext) =>
  encodeCursor(
    ctx.secret,
    { list: 'contacts', accountId: ctx.seed.big.accountId, filters: { order: 'asc' } },
    ctx.seed.deepId,
  )

export const SCENARIOS: Scenario[] = [
  { name: 'me', title: 'GET /me', method: 'GET', path: '/api/v1/me', status: 200 },
  {
    name: 'list',
    title: 'list page 1 (limit 50)',
    method: 'GET',
    path: '/api/v1/contacts?limit=50',
    status: 200,
    check: fullPage(),
  },
  {
    name: 'list-deep',
    title: 'list page at 90 % depth',
    method: 'GET',
    path: (ctx) => `/api/v1/contacts?limit=50&after=${encodeURIComponent(deepCursor(ctx))}`,
    status: 200,
    check: fullPage((contacts, ctx) =>
      (contacts[0]?.id ?? '') > ctx.seed.deepId ? undefined : 'the deep page does not start after the cursor',
    ),
  },
  {
    name: 'list-tag',
    title: 'list, tag=vip (2 %)',
    method: 'GET',
    path: '/api/v1/contacts?limit=50&tag=vip',
    status: 200,
    check: fullPage((contacts) => (contacts.every((c) => c.tags.includes('vip')) ? undefined : 'untagged contact')),
  },
  {
    name: 'list-q',
    title: 'list, q=mar (~10 %)',
    method: 'GET',
    path: '/api/v1/contacts?limit=50&q=mar',
    status: 200,
    check: fullPage(),
  },
  {
    name: 'list-304',
    title: 'list page 1, If-None-Match → 304',
    method: 'GET',
    path: POLLED_PATH,
    status: 304,
    headers: pollingHeaders,
  },
  { name: 'create', title: 'POST /contacts', method: 'POST', path: '/api/v1/contacts', body: CREATE_BODY, status: 201 },
  {
    name: 'patch',
    title: 'PATCH /contacts/{id}',
    method: 'PATCH',
    path: '/api/v1/contacts/{id}',
    body: PATCH_BODY,
    status: 200,
    ids: (ctx) => ctx.seed.patchIds,
  },
]
