// Request templates, shared by the load generator (bench/load.ts, which turns them into wrk's Lua)
// and the bench (bench/run.ts, which sends one of each before a scenario to check it and to capture
// the bytes the raw baseline serves). In a path or a body, `{n}` is a number unique per request
// within a run and `{tag}` a word unique per run (so unique emails stay unique across runs); in a
// path, `{id}` is the next of the scenario's ids, round robin.

/** A new contact per request (POST /contacts). */
export const CREATE_BODY = JSON.stringify({
  email: 'bench.{tag}.{n}@example.com',
  first_name: 'Bench',
  last_name: 'Load {n}',
  tags: ['bench'],
  custom_fields: { source: 'bench', n: '{n}' },
})

/** A change per request (PATCH /contacts/{id}). */
export const PATCH_BODY = JSON.stringify({ job_title: 'Title {tag} {n}' })

export interface Rendered {
  path: string
  body: string | undefined
}

/** The `n`-th request of a run tagged `tag` (n from 1). */
export function render(path: string, body: string | undefined, ids: string[], tag: string, n: number): Rendered {
  const fill = (text: string) =>
    text
      .replaceAll('{tag}', tag)
      .replaceAll('{n}', String(n))
      .replaceAll('{id}', ids.length > 0 ? (ids[n % ids.length] as string) : '{id}')
  return { path: fill(path), body: body === undefined ? undefined : fill(body) }
}

/** Whether requests differ (a per-request Lua function) or are all the same (wrk's static request, faster). */
export const isDynamic = (path: string, body: string | undefined): boolean =>
  /\{(n|id)\}/.test(path) || (body !== undefined && /\{(n|id)\}/.test(body))
