// The page frame: header with the account switcher, main content, one stylesheet, one script.
import type { Account } from '../../accounts/accounts.store.js'
import type { Tenant } from '../../accounts/tenant.js'
import type { AccountMembership } from '../../users/users.store.js'
import type { Role } from '../../users/users.table.js'
import { type Html, html } from '../html.js'

/**
 * `webhooks`, `logs`: the webhook and request log pages of API & Webhooks, so the mode switch leads
 * to the other mode's.
 */
export type Section = 'contacts' | 'settings' | 'api' | 'webhooks' | 'logs' | 'members' | 'sessions'

export interface PageContext {
  csrf: string
  user?: { email: string }
  memberships?: AccountMembership[]
  account?: Account
  /** The person's role in `account`: the Settings tabs show Members to owners only. */
  role?: Role
  /** Which section the header (and, under Settings, the tabs) marks as current. */
  section?: Section
  /** The account in this page's mode: a test-mode page says so in its banner and colour. */
  tenant?: Tenant
}

/** The root path of the page's mode: /app/{account}, or /app/{account}/test in test mode. */
const homeOf = (account: Account, tenant: Tenant | undefined) =>
  `/app/${account.id}${tenant?.livemode === false ? '/test' : ''}`

/**
 * The header's switch between the modes: a link, so it works without script. It leads to the same
 * section in the other mode where both have it (contacts, API keys, webhooks, request log), else to
 * contacts.
 */
function modeSwitch(context: PageContext, account: Account): Html {
  const testing = context.tenant?.livemode === false
  const other = `/app/${account.id}${testing ? '' : '/test'}`
  const paths: Partial<Record<Section, string>> = {
    api: '/settings/api',
    webhooks: '/settings/api/webhooks',
    logs: '/settings/api/logs',
  }
  const target = `${other}${(context.section && paths[context.section]) ?? '/contacts'}`
  return html`<a class="switch" href="${target}" role="switch" aria-checked="${testing ? 'true' : 'false'}"><span class="track" aria-hidden="true"></span>Test mode</a>`
}

const current = (yes: boolean) => (yes ? html`aria-current="page"` : '')

/** The header: inside an account its name leads (the switcher), not a second "Contacts" beside the section link. */
function header(context: PageContext): Html {
  const { account, memberships, user } = context
  const inSettings = context.section !== undefined && context.section !== 'contacts'
  const switcher =
    account && memberships && memberships.length > 0
      ? html`<details class="menu account-menu"><summary><span class="visually-hidden">Account: </span><strong>${account.name}</strong></summary>
<ul>${memberships.map(
          (m) =>
            html`<li><a href="/app/${m.account.id}/contacts" ${current(m.account.id === account.id)}>${m.account.name}</a> <span class="hint">${m.role}</span></li>`,
        )}<li><a href="/app/accounts/new">New account…</a></li></ul></details>`
      : html`<a class="brand" href="${user ? '/app' : '/'}">Contacts API</a>`
  const home = account && homeOf(account, context.tenant)
  const testing = context.tenant?.livemode === false
  const sections = account
    ? html`<nav class="sections" aria-label="Sections">
<a href="${home}/contacts" ${current(context.section === 'contacts')}>Contacts</a>
<a href="${testing ? `${home}/settings/api` : `${home}/settings`}" ${current(inSettings)}>Settings</a>
${modeSwitch(context, account)}
</nav>`
    : ''
  const person = user
    ? html`<details class="menu user-menu"><summary><span class="visually-hidden">Signed in as </span>${user.email}</summary>
<ul>${account ? html`<li><a href="/app/${account.id}/settings/sessions">Your sessions</a></li>` : ''}
<li><form method="post" action="/sign-out"><input type="hidden" name="_csrf" value="${context.csrf}"><button class="secondary" type="submit">Sign out</button></form></li></ul></details>`
    : ''
  const banner = testing
    ? html`<div class="test-banner" role="note"><strong>Test mode.</strong> You are looking at test data: nothing here touches live contacts, keys or webhooks.</div>`
    : ''
  return html`<header><div class="bar">${switcher}${sections}${person}</div>${banner}</header>`
}

/** The tabs of the Settings section, on each of its pages. */
function settingsTabs(context: PageContext): Html {
  const { account, section } = context
  if (!account || section === undefined || section === 'contacts') {
    return html``
  }
  // Members and sessions belong to the account, whatever the mode: their tabs lead to live mode.
  const base = `/app/${account.id}/settings`
  return html`<nav class="tabs" aria-label="Settings">
<a href="${homeOf(account, context.tenant)}/settings/api" ${current(section === 'api' || section === 'webhooks' || section === 'logs')}>API &amp; Webhooks</a>
${context.role === 'owner' ? html`<a href="${base}/members" ${current(section === 'members')}>Members</a>` : ''}
<a href="${base}/sessions" ${current(section === 'sessions')}>Your sessions</a>
</nav>`
}

export function layout(title: string, context: PageContext, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Contacts API</title>
<link rel="stylesheet" href="/assets/app.css">
<script src="/assets/app.js" defer></script>
</head>
<body${context.tenant?.livemode === false ? html` class="test-mode"` : ''}>
${header(context)}
<main>
${settingsTabs(context)}
${body}
</main>
</body>
</html>`
}

/** One labelled input with its error, so every field is keyboard- and screen-reader-friendly. */
export function field(options: {
  name: string
  label: string
  value?: string | null
  type?: string
  error?: string
  hint?: string
  required?: boolean
  autocomplete?: string
}): Html {
  const id = `f-${options.name}`
  return html`<label for="${id}">${options.label}${options.hint ? html` <span class="hint">${options.hint}</span>` : ''}</label>
<input id="${id}" name="${options.name}" type="${options.type ?? 'text'}" value="${options.value ?? ''}" ${options.required ? html`required` : ''} ${options.autocomplete ? html`autocomplete="${options.autocomplete}"` : ''} ${options.error ? html`aria-invalid="true" aria-describedby="${id}-error"` : ''}>
${options.error ? html`<p class="error" id="${id}-error">${options.error}</p>` : ''}`
}

export const csrfInput = (token: string): Html => html`<input type="hidden" name="_csrf" value="${token}">`

/** A page of one narrow card under its heading. */
export const narrowCardPage = (title: string, context: PageContext, heading: Html | string, body: Html): Html =>
  layout(title, context, html`<div class="card narrow">\n<h1>${heading}</h1>\n${body}</div>`)

/** The page that asks before a destructive action: what will happen, the button that does it, Cancel. */
export function confirmPage(
  context: PageContext,
  page: { title: string; heading: Html; body: Html; action: string; fields?: Html; button: string; cancel: string },
): Html {
  return narrowCardPage(
    page.title,
    context,
    page.heading,
    html`${page.body}
<form method="post" action="${page.action}">${csrfInput(context.csrf)}${page.fields ?? ''}
<p><button class="danger" type="submit">${page.button}</button> <a class="button secondary" href="${page.cancel}">Cancel</a></p>
</form>`,
  )
}

/** The hidden fields of a roll's confirmation: no overlap, confirmed. */
export const rollNowFields = html`<input type="hidden" name="overlap" value="now"><input type="hidden" name="confirm" value="yes">`

export function errorPage(status: number, title: string, message: string, context: PageContext): Html {
  return layout(
    title,
    context,
    html`<div class="card narrow"><h1>${title}</h1><p>${message}</p><p><a href="/app">Back to your contacts</a></p><p class="hint">Error ${status}</p></div>`,
  )
}
