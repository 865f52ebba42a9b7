// Settings → "API & Webhooks" → Webhooks: the endpoints, their secret, confirmations and one
// delivery's detail. Receivers' answers are untrusted text: html`` escapes them, never raw().
import type { AuditRecord } from '../../audit/audit.js'
import { EVENT_TYPES } from '../../events/events.js'
import type { WebhookAttempt, WebhookDelivery } from '../../webhooks/deliveries.js'
import type { WebhookEndpoint } from '../../webhooks/endpoints.js'
import { type Html, html } from '../html.js'
import { activityTable, apiSubnav } from './activity.js'
import { confirmPage, csrfInput, field, layout, type PageContext, rollNowFields } from './layout.js'

/** When a rolled secret stops signing, as for keys. */
export const SECRET_OVERLAP_CHOICES = {
  now: 'Now',
  '1h': 'In 1 hour',
  '24h': 'In 24 hours',
  '7d': 'In 7 days',
} as const

const when = (iso: string | null) =>
  iso
    ? html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`
    : html`<span class="hint">—</span>`

const base = (home: string) => `${home}/settings/api/webhooks`

const DISABLED_REASONS: Record<NonNullable<WebhookEndpoint['disabled_reason']>, string> = {
  manual: 'disabled by hand',
  failing: 'deliveries failed for 5 days',
  gone: 'the receiver answered 410 Gone',
}

export const eventsLabel = (events: readonly string[]): string =>
  events.includes('*') ? 'All events' : events.join(', ')

function endpointStatus(endpoint: WebhookEndpoint): Html {
  return html`<span class="status ${endpoint.status}">${endpoint.status}</span>${
    endpoint.disabled_reason ? html` <span class="hint">${DISABLED_REASONS[endpoint.disabled_reason]}</span>` : ''
  }`
}

const alerts = (data: { notice?: string | undefined; error?: string | undefined }) =>
  html`${data.notice ? html`<div class="alert ok" role="status">${data.notice}</div>` : ''}${
    data.error ? html`<div class="alert error" role="alert">${data.error}</div>` : ''
  }`

/** Settings → API & Webhooks → Webhooks: the endpoints and their recent activity. */
export function webhooksListPage(
  context: PageContext,
  data: { home: string; endpoints: WebhookEndpoint[]; activity: AuditRecord[]; notice?: string | undefined },
): Html {
  const { home, endpoints } = data
  const names = new Map(endpoints.map((endpoint): [string, string] => [endpoint.id, endpoint.url]))
  return layout(
    'Webhooks',
    { ...context, section: 'webhooks' },
    html`<h1>API &amp; Webhooks</h1>
${apiSubnav(home, 'webhooks')}
${alerts(data)}
<h2>Webhook endpoints</h2>
<p class="hint">Endpoints receive a signed POST for every contact change they subscribe to (Standard Webhooks).</p>
<div class="table-wrap"><table class="cards endpoints">
<thead><tr><th>URL</th><th>Description</th><th>Events</th><th>Status</th><th class="optional">Created</th></tr></thead>
<tbody>${
      endpoints.length === 0
        ? html`<tr><td colspan="5" class="hint">No webhook endpoints yet.</td></tr>`
        : endpoints.map(
            (endpoint) => html`<tr data-endpoint-id="${endpoint.id}">
<td class="mono"><a href="${base(home)}/${endpoint.id}">${endpoint.url}</a></td><td data-label="Description">${endpoint.description ?? ''}</td>
<td data-label="Events">${eventsLabel(endpoint.events)}</td><td data-label="Status">${endpointStatus(endpoint)}</td><td class="optional" data-label="Created">${when(endpoint.created_at)}</td></tr>`,
          )
    }</tbody></table></div>
<p><a class="button" href="${base(home)}/new">Add endpoint</a></p>
<h2>Webhook activity</h2>
${activityTable(data.activity, names, { target: 'Endpoint', none: 'No endpoint has been added or changed here yet.' })}`,
  )
}

export interface EndpointFormValues {
  url?: string
  description?: string
  events?: readonly string[]
}

export function newEndpointPage(
  context: PageContext,
  data: { home: string; values?: EndpointFormValues; error?: string; urlError?: string },
): Html {
  const events = data.values?.events ?? ['*']
  const checkbox = (value: string, label: string) =>
    html`<label class="check"><input type="checkbox" name="events" value="${value}" ${events.includes(value) ? html`checked` : ''}> ${label}</label>`
  return layout(
    'Add a webhook endpoint',
    { ...context, section: 'webhooks' },
    html`<div class="card">
<h1>Add a webhook endpoint</h1>
${alerts({ error: data.error })}
<form method="post" action="${base(data.home)}" novalidate>${csrfInput(context.csrf)}
${field({ name: 'url', label: 'Endpoint URL', type: 'url', value: data.values?.url, error: data.urlError, hint: 'https, on a public address', required: true })}
<fieldset><legend>Events to send</legend>
${checkbox('*', 'All events')}
${EVENT_TYPES.map((type) => checkbox(type, type))}
<p class="hint">“All events” includes types added later.</p></fieldset>
${field({ name: 'description', label: 'Description', value: data.values?.description, hint: 'optional, e.g. CRM sync' })}
<p><button type="submit">Add endpoint</button> <a class="button secondary" href="${base(data.home)}">Cancel</a></p>
</form></div>`,
  )
}

/** The signing secret shown once after a create or roll, or the note that it was shown already. */
export function secretOncePage(
  context: PageContext,
  data: { home: string; endpoint: WebhookEndpoint; secret: string | undefined; oldSecretUntil: string | null },
): Html {
  const endpointPage = `${base(data.home)}/${data.endpoint.id}`
  return layout(
    'Webhook signing secret',
    { ...context, section: 'webhooks' },
    data.secret === undefined
      ? html`<div class="card narrow">
<h1>Secret already shown</h1>
<p>The signing secret of <span class="mono">${data.endpoint.url}</span> is shown only once, right after it is made.</p>
<p>Owners and admins can reveal it again on the endpoint page (the reveal is recorded).</p>
<p><a class="button" href="${endpointPage}">Go to the endpoint</a></p></div>`
      : html`<div class="card">
<h1>Signing secret for ${data.endpoint.url}</h1>
<div class="alert warn" role="alert"><strong>Copy it now: it is shown only this once.</strong> Your receiver verifies each delivery’s <code>webhook-signature</code> with it. Keep it on your servers; if it leaks, roll it.</div>
${data.oldSecretUntil ? html`<p>The previous secret also signs deliveries until ${when(data.oldSecretUntil)}.</p>` : ''}
<label for="new-secret">Signing secret</label>
<div class="secret"><input id="new-secret" type="text" readonly value="${data.secret}" autocomplete="off" spellcheck="false"><button type="button" data-copy="new-secret" hidden>Copy</button></div>
<p><a class="button" href="${endpointPage}">I have stored it: go to the endpoint</a></p>
</div>`,
  )
}

export function endpointPage(
  context: PageContext,
  data: {
    home: string
    endpoint: WebhookEndpoint
    deliveries: WebhookDelivery[]
    oldSecretUntil: string | null
    /** The recover form's time, as datetime-local shows it (UTC). */
    recoverSince: string
    revealed?: string
    notice?: string
    error?: string
  },
): Html {
  const { endpoint } = data
  const url = `${base(data.home)}/${endpoint.id}`
  const enabled = endpoint.status === 'enabled'
  return layout(
    'Webhook endpoint',
    { ...context, section: 'webhooks' },
    html`<p><a href="${base(data.home)}">← Webhooks</a></p>
<h1>Webhook endpoint <span class="mono">${endpoint.url}</span></h1>
${alerts(data)}
<div class="card"><dl class="facts">
<dt>Status</dt><dd>${endpointStatus(endpoint)}</dd>
<dt>Events</dt><dd>${eventsLabel(endpoint.events)}</dd>
<dt>Description</dt><dd>${endpoint.description ?? html`<span class="hint">—</span>`}</dd>
<dt>Created</dt><dd>${when(endpoint.created_at)}</dd>
<dt>Id</dt><dd class="mono">${endpoint.id}</dd>
${data.oldSecretUntil ? html`<dt>Previous secret</dt><dd>still signs until ${when(data.oldSecretUntil)}</dd>` : ''}
</dl></div>

${
  data.revealed
    ? html`<div class="card"><label for="revealed-secret">Signing secret</label>
<div class="secret"><input id="revealed-secret" type="text" readonly value="${data.revealed}" autocomplete="off" spellcheck="false"><button type="button" data-copy="revealed-secret" hidden>Copy</button></div>
<p class="hint">This reveal was recorded in the account’s activity.</p></div>`
    : ''
}

<h2>Actions</h2>
<div class="card actions-row">
<form method="post" action="${url}/test">${csrfInput(context.csrf)}<button type="submit" ${enabled ? '' : html`disabled`}>Send test event</button></form>
<form method="post" action="${url}/reveal">${csrfInput(context.csrf)}<button class="secondary" type="submit">Reveal signing secret</button></form>
<form method="post" action="${url}/roll">${csrfInput(context.csrf)}
<label class="hint" for="overlap">Old secret stops signing</label>
<select id="overlap" name="overlap">${Object.entries(SECRET_OVERLAP_CHOICES).map(([value, label]) => html`<option value="${value}" ${value === '24h' ? html`selected` : ''}>${label}</option>`)}</select>
<button class="secondary" type="submit">Roll secret</button></form>
<form method="post" action="${url}/status">${csrfInput(context.csrf)}<input type="hidden" name="status" value="${enabled ? 'disabled' : 'enabled'}"><button class="secondary" type="submit">${enabled ? 'Disable endpoint' : 'Enable endpoint'}</button></form>
<a class="button secondary" href="${url}/delete">Delete…</a>
</div>
<form class="card actions-row" method="post" action="${url}/recover">${csrfInput(context.csrf)}
<label for="recover-since">Resend all failed since <span class="hint">UTC</span></label>
<input id="recover-since" name="since" type="datetime-local" step="1" required value="${data.recoverSince}">
<button class="secondary" type="submit" ${enabled ? '' : html`disabled`}>Resend failed</button>
<p class="hint">Every delivery created since then that ended as failed gets one more attempt.</p></form>

<h2>Recent deliveries</h2>
<div class="table-wrap"><table class="cards deliveries">
<thead><tr><th>Created</th><th>Event</th><th>Status</th><th>HTTP</th><th>Duration</th><th>Attempts</th><th>Next retry</th><th><span class="visually-hidden">Details</span></th></tr></thead>
<tbody>${
      data.deliveries.length === 0
        ? html`<tr><td colspan="8" class="hint">No deliveries yet. Send a test event, or change a contact.</td></tr>`
        : data.deliveries.map(
            (
              d,
            ) => html`<tr data-delivery-id="${d.id}"><td>${when(d.created_at)}</td><td class="mono" data-label="Event">${d.event_type}</td>
<td data-label="Status"><span class="status ${d.status}">${d.status}</span></td>
<td data-label="HTTP">${d.last_attempt?.status_code ?? html`<span class="hint">${d.last_attempt?.error ?? '—'}</span>`}</td>
<td data-label="Duration">${d.last_attempt ? `${d.last_attempt.duration_ms} ms` : html`<span class="hint">—</span>`}</td>
<td data-label="Attempts">${d.attempts}</td><td data-label="Next retry">${when(d.next_attempt_at)}</td>
<td class="actions"><a href="${url}/deliveries/${d.id}">Details<span class="visually-hidden"> of ${d.event_type} ${when(d.created_at)}</span></a></td></tr>`,
          )
    }</tbody></table></div>`,
  )
}

export function deleteEndpointPage(context: PageContext, data: { home: string; endpoint: WebhookEndpoint }): Html {
  const url = `${base(data.home)}/${data.endpoint.id}`
  return confirmPage(
    { ...context, section: 'webhooks' },
    {
      title: 'Delete webhook endpoint',
      heading: html`Delete this endpoint?`,
      body: html`<p><span class="mono">${data.endpoint.url}</span> will receive no more deliveries, and its delivery history goes with it. This cannot be undone.</p>`,
      action: `${url}/delete`,
      button: 'Delete endpoint',
      cancel: url,
    },
  )
}

export function rollNowConfirmPage(context: PageContext, data: { home: string; endpoint: WebhookEndpoint }): Html {
  const url = `${base(data.home)}/${data.endpoint.id}`
  return confirmPage(
    { ...context, section: 'webhooks' },
    {
      title: 'Roll signing secret',
      heading: html`Roll the secret now?`,
      body: html`<p>The current secret stops signing at once: until <span class="mono">${data.endpoint.url}</span> is given the new one, it will reject every delivery. To switch over without failures, roll with an overlap instead.</p>`,
      action: `${url}/roll`,
      fields: rollNowFields,
      button: 'Roll now',
      cancel: url,
    },
  )
}

export function deliveryPage(
  context: PageContext,
  data: {
    home: string
    endpoint: WebhookEndpoint
    delivery: WebhookDelivery
    /** Its latest attempts, oldest first, each with its number. */
    attempts: Array<WebhookAttempt & { number: number }>
    /** The exact body sent; undefined once its event is purged. */
    body: string | undefined
    notice?: string
    error?: string
  },
): Html {
  const { delivery, endpoint } = data
  const url = `${base(data.home)}/${endpoint.id}`
  const last = delivery.last_attempt
  const timestamp = last ? String(Math.floor(Date.parse(last.at) / 1000)) : undefined
  const header = (name: string, value: Html | string) =>
    html`<tr><th class="mono">${name}</th><td class="mono">${value}</td></tr>`
  return layout(
    'Webhook delivery',
    { ...context, section: 'webhooks' },
    html`<p><a href="${url}">← ${endpoint.url}</a></p>
<h1>Delivery <span class="mono">${delivery.id}</span></h1>
${alerts(data)}
<div class="card"><dl class="facts">
<dt>Event</dt><dd class="mono">${delivery.event_type} · ${delivery.event_id}</dd>
<dt>Status</dt><dd><span class="status ${delivery.status}">${delivery.status}</span></dd>
<dt>Attempts</dt><dd>${delivery.attempts}</dd>
<dt>Last attempt</dt><dd>${last ? html`${when(last.at)} · HTTP ${last.status_code ?? '—'} · ${last.duration_ms} ms${last.error ? html` · ${last.error}` : ''}` : html`<span class="hint">not attempted yet</span>`}</dd>
<dt>Next retry</dt><dd>${when(delivery.next_attempt_at)}</dd>
<dt>Created</dt><dd>${when(delivery.created_at)}</dd>
</dl>
<form method="post" action="${url}/deliveries/${delivery.id}/retry">${csrfInput(context.csrf)}<button type="submit">Resend</button></form>
</div>

<h2>Attempts</h2>
${attemptsTable(data.attempts, delivery.attempts)}

<h2>Request headers</h2>
<div class="table-wrap"><table class="headers"><tbody>
${header('content-type', 'application/json')}
${header('webhook-id', delivery.event_id)}
${header('webhook-timestamp', timestamp ?? html`<span class="hint">set when it is sent</span>`)}
${header('webhook-signature', html`v1,… <span class="hint">(not stored)</span>`)}
</tbody></table></div>

<h2>Request body</h2>
${body(data.body)}

<h2>Response</h2>
${
  last
    ? html`<p class="hint">HTTP ${last.status_code ?? 'none'}${last.error ? ` (${last.error})` : ''}; at most the first 1 KB is kept.</p>
<pre class="payload response">${last.response_excerpt === '' ? html`<span class="hint">(empty)</span>` : last.response_excerpt}</pre>`
    : html`<p class="hint">No response yet.</p>`
}`,
  )
}

function attemptsTable(attempts: Array<WebhookAttempt & { number: number }>, total: number): Html {
  if (attempts.length === 0) {
    return html`<p class="hint">Not attempted yet.</p>`
  }
  const earlier = total - attempts.length
  return html`${earlier > 0 ? html`<p class="hint">The latest ${attempts.length} of ${total} attempts; the API lists every one.</p>` : ''}
<div class="table-wrap"><table class="cards attempts">
<thead><tr><th>#</th><th>At</th><th>HTTP</th><th>Duration</th><th>Response</th></tr></thead>
<tbody>${attempts.map(
    (a) => html`<tr data-attempt="${a.number}"><td>${a.number}</td><td data-label="At">${when(a.at)}</td>
<td data-label="HTTP">${a.status_code ?? html`<span class="hint">${a.error ?? '—'}</span>`}</td>
<td data-label="Duration">${a.duration_ms} ms</td>
<td data-label="Response">${a.response_excerpt === '' ? html`<span class="hint">(empty)</span>` : html`<details><summary>${a.error ?? 'Answer'}</summary><pre class="payload response">${a.response_excerpt}</pre></details>`}</td></tr>`,
  )}</tbody></table></div>`
}

function body(text: string | undefined): Html {
  // The exact bytes sent (the signature covers them), not a re-formatted copy.
  return text === undefined
    ? html`<p class="hint">The event has been purged (older than the retention period), so its body is no longer shown.</p>`
    : html`<pre class="payload">${text}</pre>`
}
