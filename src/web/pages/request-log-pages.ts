// Settings → "API & Webhooks" → Request log: the mode's authenticated API requests with filters, a
// page at a time, the Request-Id box, and one entry's detail (docs/request-log.md#in-the-web-app).
// Paths, user agents and Idempotency-Keys are the client's text: html`` escapes them, never raw().
import type { ApiKey } from '../../api-keys/api-keys.store.js'
import { LOGGED_METHODS, type RequestLog } from '../../request-logs/request-log.js'
import { type Html, html } from '../html.js'
import { apiSubnav } from './activity.js'
import { layout, type PageContext } from './layout.js'

/** The filter form's fields as the person typed them, or as a link carried them. */
export interface LogFilterValues {
  status: string
  key_id: string
  method: string
  path: string
  created_after: string
  created_before: string
}

/** Why the Request-Id box found nothing. */
export type LookupMiss =
  | { reason: 'malformed'; value: string }
  | { reason: 'unknown'; id: string; retentionDays: number }
  /** Logged, but in the other mode: its key was of that mode. */
  | { reason: 'other_mode'; id: string; href: string }

export const logsUrl = (home: string): string => `${home}/settings/api/logs`

const modeName = (livemode: boolean) => (livemode ? 'live mode' : 'test mode')

/** To the millisecond: entries a few ms apart would otherwise read as one time. */
const at = (iso: string): Html => html`<time datetime="${iso}">${iso.slice(0, 23).replace('T', ' ')} UTC</time>`

const keyLabel = (key: Pick<ApiKey, 'name' | 'redacted'>) => `${key.name} (${key.redacted})`

function statusBadge(status: number): Html {
  // The colours the app gives states: green for a success, amber for a refusal, red for a failure.
  const tone = status >= 500 ? 'failed' : status >= 400 ? 'retrying' : 'succeeded'
  return html`<span class="status ${tone}">${status}</span>`
}

const durationOf = (ms: number) => `${ms} ms`

function filterForm(home: string, keys: readonly ApiKey[], values: LogFilterValues, filtered: boolean): Html {
  const option = (value: string, label: string, chosen: string) =>
    html`<option value="${value}" ${value === chosen ? html`selected` : ''}>${label}</option>`
  return html`<form class="card" method="get" action="${logsUrl(home)}" aria-label="Filter the request log">
<div class="row">
<div><label for="f-status">Status <span class="hint">404, or a class: 4xx</span></label><input id="f-status" name="status" type="text" value="${values.status}" placeholder="e.g. 4xx" maxlength="3" autocomplete="off"></div>
<div><label for="f-key">Key</label><select id="f-key" name="key_id">${option('', 'Any key', values.key_id)}${keys.map((key) => option(key.id, keyLabel(key), values.key_id))}</select></div>
<div><label for="f-method">Method</label><select id="f-method" name="method">${option('', 'Any', values.method)}${LOGGED_METHODS.map((method) => option(method, method, values.method))}</select></div>
</div>
<div class="row">
<div><label for="f-path">Path starts with</label><input id="f-path" name="path" type="text" value="${values.path}" placeholder="/api/v1/contacts/" autocomplete="off" spellcheck="false"></div>
<div><label for="f-after">After <span class="hint">UTC</span></label><input id="f-after" name="created_after" type="datetime-local" step="1" value="${values.created_after}"></div>
<div><label for="f-before">Before <span class="hint">UTC</span></label><input id="f-before" name="created_before" type="datetime-local" step="1" value="${values.created_before}"></div>
<div class="shrink"><button type="submit">Filter</button>${filtered ? html` <a class="button secondary" href="${logsUrl(home)}">Clear</a>` : ''}</div>
</div>
</form>`
}

function lookupBox(home: string, livemode: boolean, value: string, miss: LookupMiss | undefined): Html {
  const message = !miss
    ? ''
    : miss.reason === 'malformed'
      ? html`${miss.value === '' ? 'Paste a Request-Id first.' : html`Not found: <span class="mono">${miss.value}</span> is not a Request-Id.`} A Request-Id is <code>req_</code> and 26 letters and digits, as in a response’s <code>Request-Id</code> header or an error’s <code>request_id</code>.`
      : miss.reason === 'other_mode'
        ? html`Not found in ${modeName(livemode)}: <span class="mono">${miss.id}</span> was made with a ${livemode ? 'test' : 'live'} key. <a href="${miss.href}">Open it in ${modeName(!livemode)}</a>.`
        : html`Not found: no request <span class="mono">${miss.id}</span> was logged in this account’s ${modeName(livemode)}. Entries are kept ${miss.retentionDays} days, and a request refused for its key (401) is not logged.`
  return html`<form class="card" method="get" action="${logsUrl(home)}" role="search" aria-label="Find a request by its Request-Id">
<div class="row">
<div><label for="f-request-id">Request-Id <span class="hint">from a response header, an error report or a log line</span></label>
<input id="f-request-id" name="request_id" type="text" value="${value}" placeholder="req_01…" autocomplete="off" spellcheck="false" ${miss ? html`aria-invalid="true" aria-describedby="f-request-id-error"` : ''}></div>
<div class="shrink"><button type="submit">Open</button></div>
</div>
${miss ? html`<p class="error" id="f-request-id-error" role="alert">${message}</p>` : ''}
</form>`
}

/** Settings → API & Webhooks → Request log: the filtered list, newest first. */
export function requestLogPage(
  context: PageContext,
  data: {
    home: string
    livemode: boolean
    keys: readonly ApiKey[]
    values: LogFilterValues
    filtered: boolean
    entries: readonly RequestLog[]
    /** What is wrong with the filters (the list is not shown then). */
    errors?: readonly string[]
    lookup?: { value: string; miss: LookupMiss }
    olderHref?: string
    newestHref?: string
    /** The page's scan stopped before its end: Older goes on searching. */
    continues?: boolean
  },
): Html {
  const { home, entries } = data
  const names = new Map(data.keys.map((key): [string, string] => [key.id, key.name]))
  const empty = data.errors
    ? 'Fix the filters above to see the log.'
    : data.continues
      ? 'No matches in this stretch of the log; Older continues the search.'
      : data.filtered
        ? 'No requests match these filters.'
        : data.newestHref
          ? 'No older requests.'
          : html`No requests logged in ${modeName(data.livemode)} yet. Every request made with one of this mode’s <a href="${home}/settings/api">API keys</a> appears here within about a second, refused ones included (but not a 401: a key that is missing, unknown or revoked belongs to no account).`
  return layout(
    'Request log',
    { ...context, section: 'logs' },
    html`<h1>API &amp; Webhooks</h1>
${apiSubnav(home, 'logs')}
<h2>Request log</h2>
<p class="hint">The requests made with this account’s ${data.livemode ? 'live' : 'test'} keys, newest first: never their bodies, query strings or keys.</p>
${lookupBox(home, data.livemode, data.lookup?.value ?? '', data.lookup?.miss)}
${filterForm(home, data.keys, data.values, data.filtered)}
${data.errors ? html`<div class="alert error" role="alert">${data.errors.length === 1 ? data.errors[0] : html`<ul>${data.errors.map((error) => html`<li>${error}</li>`)}</ul>`}</div>` : ''}
<div class="table-wrap"><table class="cards request-log">
<thead><tr><th>Time</th><th>Method</th><th>Path</th><th>Status</th><th>Error code</th><th class="optional">Key</th><th>Duration</th></tr></thead>
<tbody>${
      entries.length === 0
        ? html`<tr><td colspan="7" class="hint">${empty}</td></tr>`
        : entries.map(
            (entry) => html`<tr data-request-id="${entry.id}">
<td><a href="${logsUrl(home)}/${entry.id}">${at(entry.created_at)}<span class="visually-hidden"> ${entry.method} ${entry.path}</span></a></td>
<td class="mono" data-label="Method">${entry.method}</td><td data-label="Path"><code>${entry.path}</code></td>
<td data-label="Status">${statusBadge(entry.status)}</td><td class="mono" data-label="Error code">${entry.error_code ?? ''}</td>
<td class="optional" data-label="Key">${names.get(entry.key_id) ?? entry.key_id}</td><td data-label="Duration">${durationOf(entry.duration_ms)}</td></tr>`,
          )
    }</tbody></table></div>
<nav class="pager" aria-label="Pages">
${data.newestHref ? html`<a class="button secondary" href="${data.newestHref}">Newest</a>` : ''}
${data.olderHref ? html`<a class="button secondary" href="${data.olderHref}" rel="next">Older</a>` : ''}
</nav>`,
  )
}

/** One entry: every field the API gives it (docs/request-log.md#what-an-entry-holds). */
export function requestLogEntryPage(
  context: PageContext,
  data: { home: string; entry: RequestLog; key: ApiKey | undefined },
): Html {
  const { home, entry, key } = data
  const none = html`<span class="hint">none</span>`
  const byKey = `${logsUrl(home)}?${new URLSearchParams({ key_id: entry.key_id })}`
  return layout(
    'Request',
    { ...context, section: 'logs' },
    html`<p><a href="${logsUrl(home)}">← Request log</a></p>
<h1>Request <span class="mono">${entry.id}</span></h1>
<div class="card"><dl class="facts">
<dt>Request-Id</dt><dd class="mono">${entry.id}</dd>
<dt>Mode</dt><dd>${entry.livemode ? 'live' : 'test'}</dd>
<dt>Time</dt><dd>${at(entry.created_at)}</dd>
<dt>Method</dt><dd class="mono">${entry.method}</dd>
<dt>Path</dt><dd class="mono">${entry.path}</dd>
<dt>Route</dt><dd class="mono">${entry.route}</dd>
<dt>Status</dt><dd>${statusBadge(entry.status)}</dd>
<dt>Error code</dt><dd class="mono">${entry.error_code ?? none}</dd>
<dt>Duration</dt><dd>${durationOf(entry.duration_ms)}</dd>
<dt>Key</dt><dd>${key ? html`${keyLabel(key)} ` : ''}<span class="mono">${entry.key_id}</span> · <a href="${byKey}">its requests</a></dd>
<dt>IP address</dt><dd class="mono">${entry.ip}</dd>
<dt>User-Agent</dt><dd class="mono">${entry.user_agent ?? none}</dd>
<dt>Idempotency-Key</dt><dd class="mono">${entry.idempotency_key ?? none}</dd>
<dt>Replayed</dt><dd>${entry.idempotent_replayed ? 'yes: the answer of an earlier request with this Idempotency-Key' : 'no'}</dd>
</dl></div>
<details><summary>As the API gives it</summary>
<pre class="payload">${JSON.stringify(entry, null, 2)}</pre>
</details>`,
  )
}
