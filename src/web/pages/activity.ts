// Recent entries of the audit log on a settings page, and the sub-navigation of API & Webhooks.
import type { AuditAction, AuditRecord } from '../../audit/audit.js'
import { type Html, html } from '../html.js'

const AUDIT_ACTIONS: Record<AuditAction, string> = {
  'api_key.created': 'Key created',
  'api_key.rolled': 'Key rolled',
  'api_key.revoked': 'Key revoked',
  'api_key.kept': 'Key kept after its creator left',
  'api_key.exposed': 'Key reported found in public',
  'test_data.deleted': 'All test data deleted',
  'webhook_endpoint.created': 'Webhook endpoint added',
  'webhook_endpoint.updated': 'Webhook endpoint changed',
  'webhook_endpoint.deleted': 'Webhook endpoint deleted',
  'webhook_endpoint.secret_rolled': 'Webhook secret rolled',
  'webhook_endpoint.secret_revealed': 'Webhook secret revealed',
  'webhook_endpoint.test_sent': 'Webhook test event sent',
  'webhook_delivery.retried': 'Webhook delivery resent',
  'webhook_endpoint.recovered': 'Failed webhook deliveries resent',
}

/** Why a key was revoked, when not by hand. */
const REVOCATION_REASONS: Record<string, string> = {
  creator_removed: ': its creator left',
  exposed: ': found in public',
}
const revocationReason = (reason: unknown): string =>
  typeof reason === 'string' && Object.hasOwn(REVOCATION_REASONS, reason) ? (REVOCATION_REASONS[reason] ?? '') : ''

/** Who acted when no person did: a leaked-key report says where it came from; else the command line. */
const byNoPerson = (detail: Record<string, unknown>): string =>
  typeof detail.source === 'string' && detail.source !== 'operator' ? 'a leaked-key report' : 'command line'

export const when = (iso: string | null): Html =>
  iso
    ? html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`
    : html`<span class="hint">—</span>`

/** The entries, newest first; `names` names the targets it knows, `target` heads their column. */
export function activityTable(
  entries: AuditRecord[],
  names: ReadonlyMap<string, string>,
  texts: { target: string; none: string },
): Html {
  if (entries.length === 0) {
    return html`<p class="hint">${texts.none}</p>`
  }
  return html`<div class="table-wrap"><table class="cards activity">
<thead><tr><th>When</th><th>What</th><th>${texts.target}</th><th>Who</th><th class="optional">From</th></tr></thead>
<tbody>${entries.map(
    (
      entry,
    ) => html`<tr><td>${when(entry.at)}</td><td data-label="What">${AUDIT_ACTIONS[entry.action]}${entry.action === 'api_key.revoked' ? revocationReason(entry.detail.reason) : ''}</td>
<td data-label="${texts.target}">${names.get(entry.targetId) ?? entry.targetId}</td><td data-label="Who">${entry.actorUserId === null ? byNoPerson(entry.detail) : (entry.actorEmail ?? 'a former member')}</td>
<td class="optional mono" data-label="From">${entry.ip ?? ''}</td></tr>`,
  )}</tbody></table></div>`
}

/** Entries of the audit log a settings page shows. */
export const ACTIVITY_SHOWN = 20

/**
 * The parts of Settings → API & Webhooks, each its own page; Webhooks and Request log for owners and
 * admins only (`manager`), as their routes check.
 */
export function apiSubnav(home: string, current: 'keys' | 'webhooks' | 'logs', manager = true): Html {
  const link = (path: string, name: string, here: boolean) =>
    html`<a href="${home}/settings/api${path}" ${here ? html`aria-current="page"` : ''}>${name}</a>`
  return html`<nav class="subnav" aria-label="API &amp; Webhooks">${link('', 'API keys', current === 'keys')}${manager ? html`${link('/webhooks', 'Webhooks', current === 'webhooks')}${link('/logs', 'Request log', current === 'logs')}` : ''}</nav>`
}
