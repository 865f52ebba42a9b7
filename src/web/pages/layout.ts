// The page frame: header with the account switcher, main content, one stylesheet, one script.
import type { Account } from '../../accounts/accounts.store.js'
import type { AccountMembership } from '../../users/users.store.js'
import { type Html, html } from '../html.js'

export interface PageContext {
  csrf: string
  user?: { email: string }
  memberships?: AccountMembership[]
  account?: Account
  /** Which section the header marks as current. */
  section?: 'contacts' | 'settings' | 'api' | 'members'
}

export function layout(title: string, context: PageContext, body: Html): Html {
  const { account, memberships, user } = context
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Contacts</title>
<link rel="stylesheet" href="/assets/app.css">
<script src="/assets/app.js" defer></script>
</head>
<body>
<header><div class="bar">
  <a class="brand" href="/app">Contacts</a>
  ${
    account
      ? html`<nav aria-label="Sections">
    <a href="/app/${account.id}/contacts" ${context.section === 'contacts' ? html`aria-current="page"` : ''}>Contacts</a>
    <a href="/app/${account.id}/settings" ${context.section && context.section !== 'contacts' ? html`aria-current="page"` : ''}>Settings</a>
  </nav>`
      : html`<nav></nav>`
  }
  ${
    memberships && memberships.length > 0 && account
      ? html`<details><summary>Account: <strong>${account.name}</strong></summary>
    <ul>${memberships.map(
      (m) =>
        html`<li><a href="/app/${m.account.id}/contacts">${m.account.name}</a> <span class="hint">${m.role}</span></li>`,
    )}<li><a href="/app/accounts/new">New account…</a></li></ul></details>`
      : ''
  }
  ${
    user
      ? html`<form class="inline" method="post" action="/sign-out"><input type="hidden" name="_csrf" value="${context.csrf}"><span class="hint">${user.email}</span> <button class="secondary" type="submit">Sign out</button></form>`
      : ''
  }
</div></header>
<main>
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

export function errorPage(status: number, title: string, message: string, context: PageContext): Html {
  return layout(
    title,
    context,
    html`<div class="card narrow"><h1>${title}</h1><p>${message}</p><p><a href="/app">Back to your contacts</a></p><p class="hint">Error ${status}</p></div>`,
  )
}
