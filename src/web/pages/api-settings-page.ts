// Settings → "API & Webhooks" → API keys: the keys with their use, creating, rolling and revoking
// one, their recent activity, and in test mode the deletion of test data (webhooks: webhooks-pages.ts).
import type { ApiKey } from '../../api-keys/api-keys.store.js'
import { keyState } from '../../api-keys/api-keys.store.js'
import type { AuditRecord } from '../../audit/audit.js'
import { type Html, html, raw } from '../html.js'
import { activityTable, apiSubnav, when } from './activity.js'
import { confirmPage, csrfInput, field, layout, type PageContext, rollNowFields } from './layout.js'

export const USAGE_DAYS = 14
export const EXPIRY_CHOICES = {
  never: 'Never',
  '7d': 'In 7 days',
  '30d': 'In 30 days',
  '90d': 'In 90 days',
  '365d': 'In 1 year',
} as const
export const OVERLAP_CHOICES = { now: 'Now', '1h': 'In 1 hour', '24h': 'In 24 hours', '7d': 'In 7 days' } as const

export interface KeyRow {
  key: ApiKey
  /** Requests per day, oldest first, USAGE_DAYS entries. */
  usage: number[]
  /** Who created it: an email, or how it was made. */
  createdBy: string
}

/** last_used_at is written at most once a minute per key: a recent one reads "within the last minute". */
function lastUsed(iso: string | null, now: Date): Html {
  if (iso === null) {
    return html`<span class="hint">Never</span>`
  }
  return now.getTime() - Date.parse(iso) < 60_000
    ? html`<time datetime="${iso}">Within the last minute</time>`
    : date(iso)
}

const date = when

/** How long the page names a key that a leaked-key report found in public. */
const EXPOSED_SHOWN_MS = 30 * 24 * 3600 * 1000

/** The keys reported found in public lately: what happened to each, and what to do. */
function exposedBanner(keys: readonly ApiKey[], now: Date): Html | '' {
  const since = new Date(now.getTime() - EXPOSED_SHOWN_MS).toISOString()
  const exposed = keys.filter((key) => key.exposed_at !== null && key.exposed_at >= since)
  if (exposed.length === 0) {
    return ''
  }
  // Only an http(s) URL becomes a link; any other is shown as text.
  const where = (url: string | null) =>
    !url
      ? ''
      : /^https?:\/\//i.test(url)
        ? html` at <a href="${url}" rel="noreferrer nofollow">${url}</a>`
        : html` at ${url}`
  const stateOf = (key: ApiKey) =>
    key.revoked_at === null
      ? 'It still works: roll it now, and remove it from where it was found.'
      : key.exposed_at !== null && key.revoked_at < key.exposed_at
        ? 'It had been revoked already.'
        : 'It was revoked at once: put a new key wherever it was used.'
  return html`<div class="alert warn" role="alert">${exposed.map(
    (key) =>
      html`<p><strong>${key.name}</strong> (<span class="mono">${key.redacted}</span>) was found in public${where(key.exposed_url)}, ${date(key.exposed_at)}. ${stateOf(key)}</p>`,
  )}</div>`
}

/** A small bar chart; numbers only, so the markup is built as a trusted string. */
function usageChart(usage: number[], days: string[]): Html {
  const max = Math.max(1, ...usage)
  const bars = usage
    .map((n, i) => {
      const h = n === 0 ? 2 : Math.max(3, Math.round((n / max) * 28))
      return `<rect x="${i * 8}" y="${30 - h}" width="6" height="${h}" class="${n === 0 ? 'zero' : ''}"><title>${days[i]}: ${n}</title></rect>`
    })
    .join('')
  const total = usage.reduce((a, b) => a + b, 0)
  return raw(
    `<svg class="usage" width="${usage.length * 8}" height="30" viewBox="0 0 ${usage.length * 8} 30" role="img" aria-label="${total} request${total === 1 ? '' : 's'} in the last ${usage.length} days">${bars}</svg> <span class="hint">${total}</span>`,
  )
}

export function apiSettingsPage(
  context: PageContext,
  data: {
    home: string
    keys: KeyRow[]
    days: string[]
    now: Date
    /** The keys' recent activity (the audit log's key entries). */
    activity: AuditRecord[]
    /** May open the webhooks page (owners and admins). */
    manageWebhooks: boolean
    /** May issue full-access keys (owners and admins; a member only read-only ones). */
    fullAccess: boolean
    /** May roll and revoke this key (a member: only the read-only keys they issued). */
    mayManage: (key: ApiKey) => boolean
    notice?: string
    values?: { name?: string }
    error?: string
    /** In test mode: whether this person may delete the test data, and since when it is being deleted. */
    testData?: { mayDelete: boolean; deletingSince?: string } | undefined
  },
): Html {
  const { home } = data
  const targetNames = new Map(data.keys.map(({ key }): [string, string] => [key.id, key.name]))
  return layout(
    'API & Webhooks',
    { ...context, section: 'api' },
    html`<h1>API &amp; Webhooks</h1>
${apiSubnav(home, 'keys', data.manageWebhooks)}
${data.notice ? html`<div class="alert ok" role="status">${data.notice}</div>` : ''}
${exposedBanner(
  data.keys.map((row) => row.key),
  data.now,
)}
<h2>API keys</h2>
<p class="hint">Keys authenticate requests to the API as this account: <code>Authorization: Bearer &lt;key&gt;</code>. Keep them on your servers.</p>
<div class="table-wrap"><table class="cards keys">
<thead><tr><th>Name</th><th>Key</th><th>Access</th><th class="optional">Created</th><th>Last used</th><th>Expires</th><th>Status</th><th>Requests, ${USAGE_DAYS} days</th><th>Actions</th></tr></thead>
<tbody>
${
  data.keys.length === 0
    ? html`<tr><td colspan="9" class="hint">No keys yet.</td></tr>`
    : data.keys.map(({ key, usage, createdBy }) => {
        const state = keyState(key, data.now)
        return html`<tr data-key-id="${key.id}">
<td data-label="Name">${key.name}</td><td class="mono" data-label="Key">${key.redacted}</td><td data-label="Access">${key.scopes.includes('write') ? 'full' : 'read-only'}</td>
<td class="optional" data-label="Created">${date(key.created_at)}<br><span class="hint">by ${createdBy}</span></td><td data-label="Last used">${lastUsed(key.last_used_at, data.now)}</td>
<td data-label="Expires">${key.expires_at ? date(key.expires_at) : 'Never'}</td>
<td data-label="Status"><span class="status ${state}">${state}</span></td>
<td data-label="Requests, ${USAGE_DAYS} days">${usageChart(usage, data.days)}</td>
<td class="actions">${
          state === 'active' && data.mayManage(key)
            ? html`<a class="button secondary" href="${home}/settings/api/keys/${key.id}/roll">Roll…<span class="visually-hidden"> ${key.name}</span></a>
<a class="button secondary" href="${home}/settings/api/keys/${key.id}/revoke">Revoke…<span class="visually-hidden"> ${key.name}</span></a>`
            : ''
        }</td></tr>`
      })
}
</tbody></table></div>

<h2>Create a key</h2>
<div class="card"><form method="post" action="${home}/settings/api/keys" novalidate>
${csrfInput(context.csrf)}
<div class="row">
<div>${field({ name: 'name', label: 'Name', value: data.values?.name, error: data.error, hint: 'e.g. Production server', required: true })}</div>
<div><label for="f-scope">Access</label><select id="f-scope" name="scope">${data.fullAccess ? raw('<option value="full">Full (read and write)</option>') : ''}<option value="read">Read-only</option></select></div>
<div><label for="f-expires">Expires</label><select id="f-expires" name="expires">${Object.entries(EXPIRY_CHOICES).map(([value, label]) => html`<option value="${value}">${label}</option>`)}</select></div>
<div class="shrink"><button type="submit">Create key</button></div>
</div></form></div>

${data.manageWebhooks ? '' : html`<p class="hint">Webhooks: owners and admins of this account manage the endpoints and see the request log. Every change is also in <code>GET /api/v1/events</code>.</p>`}
<h2>Key activity</h2>
${activityTable(data.activity, targetNames, {
  target: 'Key',
  none: 'No key has been issued, rolled or revoked here yet.',
})}

${data.testData ? testDataSection(home, data.testData) : ''}`,
  )
}

function testDataSection(home: string, testData: { mayDelete: boolean; deletingSince?: string }): Html {
  return html`<h2>Test data</h2>
<div class="card">${
    testData.deletingSince
      ? html`<p role="status">All test data is being deleted (asked for ${date(testData.deletingSince)}). Reload to see what is left.</p>`
      : html`<p>Delete every test-mode contact, event, webhook endpoint and delivery, import and stored Idempotency-Key answer of this account. Test keys stay; live mode is not touched.</p>
${testData.mayDelete ? html`<p><a class="button danger" href="${home}/settings/test-data/delete">Delete all test data…</a></p>` : html`<p class="hint">Owners and admins can delete the test data.</p>`}`
  }</div>`
}

export function keyCreatedPage(
  context: PageContext,
  data: { home: string; key: ApiKey; secret: string; rolledFrom?: ApiKey },
): Html {
  return layout(
    'Your new API key',
    { ...context, section: 'api' },
    html`<div class="card">
<h1>Your new API key: ${data.key.name}</h1>
${data.rolledFrom ? html`<p>It replaces <span class="mono">${data.rolledFrom.redacted}</span>, which ${data.rolledFrom.expires_at ? html`expires ${date(data.rolledFrom.expires_at)}` : 'has expired'}.</p>` : ''}
<div class="alert warn" role="alert"><strong>Copy it now: it is shown only this once.</strong> Store it in your secret manager or server environment. Never put it in client-side code (browsers, mobile apps) or commit it to version control. If it leaks, roll it here at once.</div>
<label for="new-key">API key</label>
<div class="secret"><input id="new-key" type="text" readonly value="${data.secret}" autocomplete="off" spellcheck="false"><button type="button" data-copy="new-key" hidden>Copy</button></div>
<p class="hint">Scopes: ${data.key.scopes.join(', ')}. ${data.key.expires_at ? html`Expires ${date(data.key.expires_at)}.` : 'Does not expire.'}</p>
<p><a class="button" href="${data.home}/settings/api">I have stored it: back to API keys</a></p>
</div>`,
  )
}

/** Roll: a new key replaces this one; the person chooses how long the old one keeps working. */
export function rollKeyPage(context: PageContext, data: { home: string; key: ApiKey }): Html {
  return layout(
    'Roll key',
    { ...context, section: 'api' },
    html`<div class="card narrow">
<h1>Roll “${data.key.name}”</h1>
<p>A new key replaces <span class="mono">${data.key.redacted}</span>. Give your clients the new key before the old one stops working.</p>
<form method="post" action="${data.home}/settings/api/keys/${data.key.id}/roll">${csrfInput(context.csrf)}
<label for="f-overlap">Old key expires</label>
<select id="f-overlap" name="overlap">${Object.entries(OVERLAP_CHOICES).map(([value, label]) => html`<option value="${value}" ${value === '24h' ? html`selected` : ''}>${label}</option>`)}</select>
<p class="hint">“Now” stops the old key at once; you are asked to confirm.</p>
<p><button type="submit">Roll key</button> <a class="button secondary" href="${data.home}/settings/api">Cancel</a></p>
</form></div>`,
  )
}

/** Rolling with no overlap stops the live key at once: asked like a revoke. */
export function rollNowConfirmPage(context: PageContext, data: { home: string; key: ApiKey }): Html {
  return confirmPage(
    { ...context, section: 'api' },
    {
      title: 'Roll key now',
      heading: html`Roll “${data.key.name}” now?`,
      body: html`<p>A new key replaces <span class="mono">${data.key.redacted}</span>, which stops working at once: every client still using it gets 401 until it has the new key. Choose an overlap instead to switch over without an outage.</p>`,
      action: `${data.home}/settings/api/keys/${data.key.id}/roll`,
      fields: rollNowFields,
      button: 'Roll now',
      cancel: `${data.home}/settings/api`,
    },
  )
}

export function revokeConfirmPage(context: PageContext, data: { home: string; key: ApiKey; requests: number }): Html {
  return confirmPage(
    { ...context, section: 'api' },
    {
      title: 'Revoke key',
      heading: html`Revoke “${data.key.name}”?`,
      body: html`<p>Requests with <span class="mono">${data.key.redacted}</span> will be refused within a second. This cannot be undone.</p>
<p class="hint">It made ${data.requests} request${data.requests === 1 ? '' : 's'} in the last ${USAGE_DAYS} days${data.key.last_used_at ? html`, last ${date(data.key.last_used_at)}` : ''}.</p>`,
      action: `${data.home}/settings/api/keys/${data.key.id}/revoke`,
      button: 'Revoke key',
      cancel: `${data.home}/settings/api`,
    },
  )
}
