// Contacts pages: the list with search and paging, the create / edit form, delete confirmation
// (the CSV import's pages are in import-pages.ts).
import { CONTACT_FIELDS, type Contact, type ContactField } from '../../contacts/contacts.schemas.js'
import { type Html, html } from '../html.js'
import { confirmPage, csrfInput, field, layout, type PageContext } from './layout.js'

/** Every writable field but custom_fields, shown read-only below the form (set through the API or an import). */
export type ContactFormField = Exclude<ContactField, 'custom_fields'>
export const CONTACT_FORM_FIELDS = CONTACT_FIELDS.filter(
  (field): field is ContactFormField => field !== 'custom_fields',
)
export type ContactFormValues = Record<ContactFormField, string>
export type ContactFormErrors = Partial<Record<ContactFormField | 'form', string>>

/** Every writable field's label: a new field fails to compile here until its place on the page is decided. */
const LABELS: Record<ContactField, string> = {
  email: 'Email',
  first_name: 'First name',
  last_name: 'Last name',
  phone: 'Phone',
  company: 'Company',
  job_title: 'Job title',
  tags: 'Tags',
  custom_fields: 'Custom fields',
}
const HINTS: Partial<Record<ContactFormField, string>> = {
  phone: 'international format, e.g. +44 1632 960961',
  tags: 'separated by commas, e.g. vip, newsletter',
}

/** `home`: the root path of the page's mode (request-context.ts homeOf). */
const contactsUrl = (home: string) => `${home}/contacts`

export function displayName(contact: Contact): string {
  const name = [contact.first_name, contact.last_name].filter((part) => part !== null).join(' ')
  return name || contact.email || contact.phone || 'Unnamed contact'
}

const when = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`
const notice = (text: string | undefined) => (text ? html`<div class="alert ok" role="status">${text}</div>` : '')

export function contactsListPage(
  context: PageContext,
  data: {
    home: string
    contacts: Contact[]
    q: string
    tag: string
    nextHref?: string
    firstHref?: string
    notice?: string
  },
): Html {
  const base = contactsUrl(data.home)
  const filtered = data.q !== '' || data.tag !== ''
  return layout(
    'Contacts',
    { ...context, section: 'contacts' },
    html`<h1>Contacts</h1>
${notice(data.notice)}
<p class="row">
<span class="shrink"><a class="button" href="${base}/new">New contact</a></span>
<span class="shrink"><a class="button secondary" href="${base}/export.csv" download>Export CSV</a></span>
<span class="shrink"><a class="button secondary" href="${base}/import">Import CSV</a></span>
</p>
<form class="card" method="get" action="${base}" role="search">
<div class="row">
<div><label for="f-q">Search</label><input id="f-q" name="q" type="search" value="${data.q}" placeholder="Start of a name, email or company"></div>
<div><label for="f-tag">Tag</label><input id="f-tag" name="tag" type="text" value="${data.tag}" placeholder="e.g. vip"></div>
<div class="shrink"><button type="submit">Search</button>${filtered ? html` <a class="button secondary" href="${base}">Clear</a>` : ''}</div>
</div>
</form>
<div class="table-wrap"><table class="cards">
<thead><tr><th>Name</th><th>Email</th><th class="optional">Phone</th><th class="optional">Company</th><th>Tags</th><th class="optional">Updated</th></tr></thead>
<tbody>
${
  data.contacts.length === 0
    ? html`<tr><td colspan="6" class="hint">${
        filtered && data.nextHref
          ? 'No matches in this part of the list; the search continues on the next page.'
          : filtered
            ? 'No contacts match. Try the start of a name, an email or a company, or clear the search.'
            : data.firstHref
              ? 'No more contacts.'
              : html`No contacts yet. <a href="${base}/new">Create one</a>, <a href="${base}/import">import a CSV file</a>, or send them through the API with a key from <a href="${data.home}/settings/api">Settings → API &amp; Webhooks</a>.`
      }</td></tr>`
    : data.contacts.map(
        (contact) => html`<tr data-contact-id="${contact.id}">
<td><a href="${base}/${contact.id}">${displayName(contact)}</a></td>
<td data-label="Email">${contact.email ?? ''}</td>
<td class="optional" data-label="Phone">${contact.phone ?? ''}</td>
<td class="optional" data-label="Company">${contact.company ?? ''}</td>
<td data-label="Tags">${contact.tags.join(', ')}</td>
<td class="optional" data-label="Updated">${when(contact.updated_at)}</td>
</tr>`,
      )
}
</tbody></table></div>
<nav class="pager" aria-label="Pages">
${data.firstHref ? html`<a class="button secondary" href="${data.firstHref}">First page</a>` : ''}
${data.nextHref ? html`<a class="button secondary" href="${data.nextHref}" rel="next">Next page</a>` : ''}
</nav>`,
  )
}

/** 400: a link whose cursor or filter cannot be used. */
export function badListRequestPage(context: PageContext, data: { home: string; message: string }): Html {
  return layout(
    'Cannot show this page',
    { ...context, section: 'contacts' },
    html`<div class="card narrow"><h1>Cannot show this page</h1>
<div class="alert error" role="alert">${data.message}</div>
<p><a class="button" href="${contactsUrl(data.home)}">Back to the first page of contacts</a></p>
<p class="hint">Error 400</p></div>`,
  )
}

export function contactFormPage(
  context: PageContext,
  data: {
    home: string
    contact?: Contact
    values: ContactFormValues
    errors?: ContactFormErrors
    /** The contact that already has the submitted email (409). */
    existingId?: string
  },
): Html {
  const { home, contact, values } = data
  const errors = data.errors ?? {}
  const base = contactsUrl(home)
  const title = contact ? `Edit ${displayName(contact)}` : 'New contact'
  const input = (name: ContactFormField, type = 'text', autocomplete?: string) =>
    field({
      name,
      label: LABELS[name],
      value: values[name],
      type,
      ...(errors[name] ? { error: errors[name] } : {}),
      ...(HINTS[name] ? { hint: HINTS[name] } : {}),
      ...(autocomplete ? { autocomplete } : {}),
    })
  const fieldErrors = CONTACT_FORM_FIELDS.filter((name) => errors[name])
  return layout(
    title,
    { ...context, section: 'contacts' },
    html`<p><a href="${base}">← Contacts</a></p>
<h1>${title}</h1>
${
  errors.form || fieldErrors.length > 0
    ? html`<div class="alert error" role="alert">${errors.form ?? 'The contact was not saved. Fix the fields marked below.'}${
        data.existingId ? html` <a href="${base}/${data.existingId}">Open the contact with this email</a>.` : ''
      }</div>`
    : ''
}
<div class="card"><form method="post" action="${contact ? `${base}/${contact.id}` : base}" novalidate>
${csrfInput(context.csrf)}
<p class="hint">Enter at least an email, a phone, a first name or a last name.${contact ? ' Fields left empty are cleared.' : ''}</p>
<div class="row"><div>${input('first_name', 'text', 'off')}</div><div>${input('last_name', 'text', 'off')}</div></div>
<div class="row"><div>${input('email', 'email', 'off')}</div><div>${input('phone', 'text', 'off')}</div></div>
<div class="row"><div>${input('company', 'text', 'off')}</div><div>${input('job_title', 'text', 'off')}</div></div>
${input('tags')}
<p><button type="submit">${contact ? 'Save changes' : 'Create contact'}</button> <a class="button secondary" href="${base}">Cancel</a></p>
</form></div>
${contact ? contactDetails(home, contact) : ''}`,
  )
}

function contactDetails(home: string, contact: Contact): Html {
  const entries = Object.entries(contact.custom_fields)
  return html`<h2>${LABELS.custom_fields}</h2>
${
  entries.length === 0
    ? html`<p class="hint">None. Custom fields are set through the API or a CSV import.</p>`
    : html`<p class="hint">Read-only here; set them through the API or a CSV import.</p>
<div class="table-wrap"><table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>
${entries.map(([key, value]) => html`<tr><td class="mono">${key}</td><td class="mono">${JSON.stringify(value)}</td></tr>`)}
</tbody></table></div>`
}
<p class="hint">Id <span class="mono">${contact.id}</span> · created ${when(contact.created_at)} · updated ${when(contact.updated_at)}</p>
<p><a class="button secondary" href="${contactsUrl(home)}/${contact.id}/delete">Delete contact…</a></p>`
}

export function deleteContactPage(context: PageContext, data: { home: string; contact: Contact }): Html {
  const url = `${contactsUrl(data.home)}/${data.contact.id}`
  return confirmPage(
    { ...context, section: 'contacts' },
    {
      title: 'Delete contact',
      heading: html`Delete “${displayName(data.contact)}”?`,
      body: html`<p>The contact${data.contact.email ? html` <strong>${data.contact.email}</strong>` : ''} and its tags and custom fields will be deleted. This cannot be undone.</p>`,
      action: `${url}/delete`,
      button: 'Delete contact',
      cancel: url,
    },
  )
}
