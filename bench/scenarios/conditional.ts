// Scenario `list-304`: a polling client whose list page is answered 304, nothing having changed
// (bench/README.md#run).
import type { ScenarioContext } from '../scenarios.js'

/** The page the `list` scenario loads; polled conditionally. */
export const POLLED_PATH = '/api/v1/contacts?limit=50'

/**
 * The If-None-Match to poll with. A freshly seeded account has no event (bench/seed.ts writes none),
 * and its pages are tagged by hashing their bytes, which reads the whole page; a live account has
 * events. So one contact is PATCHed first: from then on the page's tag is the account's version and
 * a 304 reads no contact. Waits until the tag gives a 304.
 */
export async function pollingHeaders(ctx: ScenarioContext): Promise<Record<string, string>> {
  const patchId = ctx.seed.patchIds[0]
  const patched = await fetch(`${ctx.base}/api/v1/contacts/${patchId}`, {
    method: 'PATCH',
    headers: { ...ctx.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ job_title: `Polled ${Date.now()}` }),
  })
  if (patched.status !== 200) {
    throw new Error(`list-304: PATCH ${patchId} answered ${patched.status}: ${await patched.text()}`)
  }
  // On PostgreSQL the tag also names transactions still open (another account's, the webhook
  // worker's): it is the one a poller keeps once they have ended, when a conditional GET is a 304.
  for (let attempt = 0; attempt < 20; attempt++) {
    const page = await fetch(`${ctx.base}${POLLED_PATH}`, { headers: ctx.headers })
    await page.arrayBuffer()
    const etag = page.headers.get('etag')
    if (page.status !== 200 || etag === null) {
      throw new Error(`list-304: the page answered ${page.status} with ETag ${etag}`)
    }
    const again = await fetch(`${ctx.base}${POLLED_PATH}`, { headers: { ...ctx.headers, 'if-none-match': etag } })
    await again.arrayBuffer()
    if (again.status === 304) {
      return { 'if-none-match': etag }
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`list-304: the page's ETag never gave a 304`)
}
