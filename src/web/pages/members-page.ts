// Settings → Members: the people of an account and, for its owners, the form that adds one.
import type { Member } from '../../users/users.store.js'
import { type Html, html } from '../html.js'
import { csrfInput, field, layout, type PageContext } from './layout.js'

export function membersPage(
  context: PageContext,
  data: {
    accountId: string
    members: Member[]
    /** Only owners add members. */
    canAdd: boolean
    email?: string
    error?: string
    notice?: string
  },
): Html {
  return layout(
    'Members',
    { ...context, section: 'members' },
    html`<h1>Members</h1>
${data.notice ? html`<div class="alert ok" role="status">${data.notice}</div>` : ''}
<div class="table-wrap"><table><thead><tr><th>Email</th><th>Role</th><th>Since</th></tr></thead><tbody>
${data.members.map((m) => html`<tr><td>${m.email}</td><td>${m.role}</td><td>${m.created_at.slice(0, 10)}</td></tr>`)}
</tbody></table></div>
${
  data.canAdd
    ? html`<h2>Add a member</h2><div class="card"><form method="post" action="/app/${data.accountId}/settings/members" novalidate>${csrfInput(context.csrf)}
${field({ name: 'email', label: 'Email of a person who has signed up', type: 'email', value: data.email, error: data.error, required: true })}
<p><button type="submit">Add member</button></p></form></div>`
    : html`<p class="hint">Only owners can add members.</p>`
}`,
  )
}
