// Scenario `list-304`: a polling client that asks for the first page of its contacts with
// If-None-Match and gets 304 Not Modified, nothing having changed (issue 15.5: ≥ 50 % of raw
// node:http serving the same 304 bytes). What it costs the server: authentication, one indexed
// lookup of the account's newest event (src/contacts/contacts.list-version.ts) and a hash; no
// contact is read. To wire into bench/run.ts: call prepareConditional once the server is up, load
// `scenario` (with the usual Authorization header) expecting `expectedStatus`, and compare with
// rawNotModified.mjs serving `rawHead` (a 304 has no body: the baseline is the same head).

export interface ConditionalScenario {
  name: string
  title: string
  method: 'GET'
  path: string
  /** Besides Authorization: If-None-Match with the page's ETag. */
  headers: Record<string, string>
  body: 'none'
  /** Every response must be this: a 200 means the ETag did not hold, and the run measured the wrong thing. */
  expectedStatus: 304
}

export interface PreparedConditional {
  scenario: ConditionalScenario
  /** The status and headers of the 304 as the server sent it, for the raw baseline to send byte for byte. */
  rawHead: { status: 304; headers: Record<string, string> }
}

/** The page the `list` scenario loads; the same page, conditionally. */
export const CONDITIONAL_PATH = '/api/v1/contacts?limit=50'

// Headers node:http writes itself on the raw server too (Date, Connection, Keep-Alive).
const SET_BY_NODE = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding'])

/**
 * Gets the ETag to poll with. A freshly seeded account has no event (bench/seed.ts writes none), and
 * its pages are tagged by hashing their bytes, which reads the whole page; a live account has
 * events. So one contact is PATCHed first (`patchId`, any contact of the account): from then on the
 * page's tag is the account's version and a 304 reads no contact. Checks that the tag gives a 304.
 */
export async function prepareConditional(
  base: string,
  authorization: Record<string, string>,
  patchId: string,
): Promise<PreparedConditional> {
  const patched = await fetch(`${base}/api/v1/contacts/${patchId}`, {
    method: 'PATCH',
    headers: { ...authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ job_title: `Polled ${Date.now()}` }),
  })
  if (patched.status !== 200) {
    throw new Error(`list-304: PATCH ${patchId} answered ${patched.status}: ${await patched.text()}`)
  }
  const page = await fetch(`${base}${CONDITIONAL_PATH}`, { headers: authorization })
  await page.arrayBuffer()
  const etag = page.headers.get('etag')
  if (page.status !== 200 || etag === null) {
    throw new Error(`list-304: the page answered ${page.status} with ETag ${etag}`)
  }
  const headers = { 'if-none-match': etag }
  const check = await fetch(`${base}${CONDITIONAL_PATH}`, { headers: { ...authorization, ...headers } })
  await check.arrayBuffer()
  if (check.status !== 304) {
    throw new Error(`list-304: If-None-Match ${etag} answered ${check.status}, not 304`)
  }
  const rawHeaders: Record<string, string> = {}
  check.headers.forEach((value, name) => {
    if (!SET_BY_NODE.has(name)) {
      rawHeaders[name] = value
    }
  })
  return {
    scenario: {
      name: 'list-304',
      title: 'list page 1, If-None-Match → 304',
      method: 'GET',
      path: CONDITIONAL_PATH,
      headers,
      body: 'none',
      expectedStatus: 304,
    },
    rawHead: { status: 304, headers: rawHeaders },
  }
}
