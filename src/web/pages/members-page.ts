// Settings → Members (owners only): the people of an account with their roles, the pending
// invitations, and the form that invites someone by email.
import { tenantById } from '../../accounts/tenant.js'
import type { ApiKey } from '../../api-keys/api-keys.store.js'
import type { Invitation } from '../../invitations/invitations.store.js'
import type { Member } from '../../users/users.store.js'
import type { Role } from '../../users/users.table.js'
import { type Html, html } from '../html.js'
import { confirmPage, csrfInput, field, layout, type PageContext } from './layout.js'

const ROLE_LABELS: Record<Role, string> = {
  owner: 'Owner: everything, members and account deletion included',
  admin: 'Admin: contacts, API keys, webhooks',
  member: 'Member: contacts, read-only API keys',
}

const roleSelect = (id: string, roles: readonly Role[], selected: string | undefined, long: boolean): Html =>
  html`<select id="${id}" name="role">${roles.map(
    (role) =>
      html`<option value="${role}" ${role === selected ? html`selected` : ''}>${long ? ROLE_LABELS[role] : role}</option>`,
  )}</select>`

export function membersPage(
  context: PageContext,
  data: {
    accountId: string
    userId: string
    members: Member[]
    invitations: Invitation[]
    email?: string
    role?: string
    error?: string
    notice?: string
  },
): Html {
  const base = `/app/${data.accountId}/settings/members`
  return layout(
    'Members',
    { ...context, section: 'members' },
    html`<h1>Members</h1>
${data.notice ? html`<div class="alert ok" role="status">${data.notice}</div>` : ''}
<div class="table-wrap"><table class="cards"><thead><tr><th>Email</th><th>Role</th><th>Since</th><th>Actions</th></tr></thead><tbody>
${data.members.map(
  (
    m,
  ) => html`<tr><td>${m.email}${m.id === data.userId ? ' (you)' : ''}</td><td data-label="Role">${m.role}</td><td data-label="Since">${m.created_at.slice(0, 10)}</td><td class="actions">
<form class="inline-form" method="post" action="${base}/${m.id}/role">${csrfInput(context.csrf)}
<label class="visually-hidden" for="role-${m.id}">Role of ${m.email}</label>${roleSelect(`role-${m.id}`, ['owner', 'admin', 'member'], m.role, false)}
<button class="secondary" type="submit">Change role<span class="visually-hidden"> of ${m.email}</span></button></form>
<a class="button secondary" href="${base}/${m.id}/remove">Remove…<span class="visually-hidden"> ${m.email}</span></a></td></tr>`,
)}
</tbody></table></div>
<h2>Pending invitations</h2>
${
  data.invitations.length === 0
    ? html`<p class="hint">None.</p>`
    : html`<div class="table-wrap"><table class="cards"><thead><tr><th>Email</th><th>Role</th><th>Invited</th><th>Expires</th><th>Actions</th></tr></thead><tbody>
${data.invitations.map(
  (
    i,
  ) => html`<tr><td>${i.email}</td><td data-label="Role">${i.role}</td><td data-label="Invited">${i.created_at.slice(0, 10)}</td><td data-label="Expires">${i.expires_at.slice(0, 16).replace('T', ' ')} UTC</td><td class="actions">
<form class="inline" method="post" action="${base}/invitations/${i.id}/revoke">${csrfInput(context.csrf)}<button class="secondary" type="submit">Revoke<span class="visually-hidden"> invitation for ${i.email}</span></button></form></td></tr>`,
)}
</tbody></table></div>`
}
<h2>Invite someone</h2>
<div class="card"><form method="post" action="${base}" novalidate>${csrfInput(context.csrf)}
${field({ name: 'email', label: 'Email', type: 'email', value: data.email, error: data.error, required: true, hint: 'they accept while signed in with this email; someone without an account signs up first' })}
<label for="f-role">Role</label>${roleSelect('f-role', ['member', 'admin'], data.role, true)}
<p><button type="submit">Create invitation link</button></p>
<p class="hint">You get a link, valid for 7 days and usable once, to pass on yourself: no email is sent.</p></form></div>`,
  )
}

/** The invitation link, shown once on the page the invite POST redirects to. */
export function invitationCreatedPage(
  context: PageContext,
  data: { accountId: string; invitation: Invitation; link: string },
): Html {
  return layout(
    'Invitation link',
    { ...context, section: 'members' },
    html`<div class="card">
<h1>Invitation for ${data.invitation.email}</h1>
<div class="alert warn" role="alert"><strong>Copy the link now: it is shown only this once.</strong> Send it to ${data.invitation.email} yourself. It works once, for 7 days, and only for someone signed in with that email.</div>
<label for="invitation-link">Invitation link</label>
<div class="secret"><input id="invitation-link" type="text" readonly value="${data.link}" autocomplete="off" spellcheck="false"><button type="button" data-copy="invitation-link" hidden>Copy</button></div>
<p class="hint">Role: ${data.invitation.role}. If it is lost, invite the same email again: the earlier link stops working.</p>
<p><a class="button" href="/app/${data.accountId}/settings/members">Back to members</a></p>
</div>`,
  )
}

export function removeMemberConfirmPage(
  context: PageContext,
  data: { accountId: string; member: Member; self: boolean; keys: readonly ApiKey[] },
): Html {
  const who = data.self ? 'you' : data.member.email
  const keys =
    data.keys.length === 0
      ? html`<p class="hint">${data.self ? 'You have' : html`${data.member.email} has`} created no API key that still works.</p>`
      : html`<p>The API keys ${who} created stop working with the removal, so that leaving ends API access too. Tick a key to keep it working.</p>
<fieldset><legend>API keys created by ${who}</legend>${data.keys.map(
          (key) =>
            html`<label class="checkbox"><input type="checkbox" name="keep" value="${key.id}"> Keep <strong>${key.name}</strong> <span class="mono">${key.redacted}</span> (${tenantById(key.account_id).livemode ? 'live' : 'test'}, ${key.last_used_at ? html`last used ${key.last_used_at.slice(0, 10)}` : 'never used'})</label>`,
        )}</fieldset>`
  return confirmPage(
    { ...context, section: 'members' },
    {
      title: 'Remove member',
      heading: html`Remove ${data.member.email}?`,
      body: html`<p>${data.self ? 'You lose access to this account at once.' : html`${data.member.email} loses access to this account at once: their next page in it is refused.`}</p>`,
      fields: keys,
      action: `/app/${data.accountId}/settings/members/${data.member.id}/remove`,
      button: 'Remove member',
      cancel: `/app/${data.accountId}/settings/members`,
    },
  )
}
