// Settings (the section beside Contacts), the person's sessions, and the page an invitation link opens.
import type { Invitation } from '../../invitations/invitations.store.js'
import type { SessionInfo } from '../../users/sessions.store.js'
import { type Html, html } from '../html.js'
import { withNext } from '../next-path.js'
import { csrfInput, layout, type PageContext } from './layout.js'

export function settingsPage(context: PageContext, data: { accountId: string; canManageMembers: boolean }): Html {
  const base = `/app/${data.accountId}/settings`
  return layout(
    'Settings',
    { ...context, section: 'settings' },
    html`<h1>Settings</h1>
<ul class="settings-list">
<li><a href="${base}/api">API &amp; Webhooks</a> <span class="hint">API keys, webhook endpoints and the activity log</span></li>
${data.canManageMembers ? html`<li><a href="${base}/members">Members</a> <span class="hint">invite people, change roles, remove members</span></li>` : ''}
<li><a href="${base}/sessions">Your sessions</a> <span class="hint">where you are signed in; sign out everywhere else</span></li>
</ul>`,
  )
}

const when = (iso: string | null): string => (iso ? `${iso.slice(0, 16).replace('T', ' ')} UTC` : '—')

export function sessionsPage(
  context: PageContext,
  data: { sessions: SessionInfo[]; notice?: string; signOutOthers: string },
): Html {
  const others = data.sessions.filter((s) => !s.current).length
  return layout(
    'Your sessions',
    { ...context, section: 'sessions' },
    html`<h1>Your sessions</h1>
${data.notice ? html`<div class="alert ok" role="status">${data.notice}</div>` : ''}
<p class="hint">Every browser where you are signed in, for all your accounts. A session ends after 14 days.</p>
<div class="table-wrap"><table class="cards"><thead><tr><th>Browser</th><th>Signed in</th><th>Last seen</th><th><span class="visually-hidden">Actions</span></th></tr></thead><tbody>
${data.sessions.map(
  (s) =>
    html`<tr><td>${s.user_agent ?? 'Unknown'}</td><td data-label="Signed in">${when(s.created_at)}</td><td data-label="Last seen">${when(s.last_seen_at)}</td><td>${s.current ? html`<strong>This session</strong>` : ''}</td></tr>`,
)}
</tbody></table></div>
<form method="post" action="${data.signOutOthers}">${csrfInput(context.csrf)}
<p><button class="danger" type="submit" ${others === 0 ? html`disabled` : ''}>Sign out everywhere else</button></p>
<p class="hint">Ends every other session at once (${others} now); this one stays signed in.</p></form>`,
  )
}

type InvitationView = Invitation & { account_name: string }

/** What an invitation link shows: sign in first, accept, or a refusal for another email. */
export function invitationPage(
  context: PageContext,
  data: { token: string; invitation: InvitationView; signedInAs?: string },
): Html {
  const { invitation } = data
  const back = `/invitations/${data.token}`
  const intro = html`<h1>Join ${invitation.account_name}</h1>
<p>You are invited to ${invitation.account_name} as <strong>${invitation.role}</strong>. The invitation is for <strong>${invitation.email}</strong> and expires ${when(invitation.expires_at)}.</p>`
  if (data.signedInAs === undefined) {
    return layout(
      'Invitation',
      context,
      html`<div class="card narrow">${intro}
<p>Sign in as <strong>${invitation.email}</strong>, or sign up with that email if you have no account yet; you come back here to accept.</p>
<p><a class="button" href="${withNext('/sign-in', back, invitation.email)}">Sign in</a> <a class="button secondary" href="${withNext('/sign-up', back, invitation.email)}">Sign up</a></p></div>`,
    )
  }
  return layout(
    'Invitation',
    context,
    html`<div class="card narrow">${intro}
<form method="post" action="/invitations/${data.token}/accept">${csrfInput(context.csrf)}
<p><button type="submit">Accept invitation</button></p></form></div>`,
  )
}

export function invitationRefusedPage(context: PageContext, data: { invitedEmail: string; signedInAs: string }): Html {
  return layout(
    'Invitation for another email',
    context,
    html`<div class="card narrow"><h1>This invitation is for another email</h1>
<p>You are signed in as ${data.signedInAs}; the invitation is for ${data.invitedEmail}. Nothing was changed. Sign out, then sign in or sign up as ${data.invitedEmail} and open the link again.</p></div>`,
  )
}
