// Sign-up, sign-in and new-account forms.
import { type Html, html } from '../html.js'
import { withNext } from '../next-path.js'
import { csrfInput, field, layout, type PageContext } from './layout.js'

export type FormErrors = Record<string, string | undefined> & { form?: string }

/** Where the person goes once signed in (an invitation link), carried through the form. */
const nextInput = (next: string | undefined) => (next ? html`<input type="hidden" name="next" value="${next}">` : '')
const returnNote = (next: string | undefined) =>
  next?.startsWith('/invitations/')
    ? html`<p class="alert ok" role="status">Then you return to your invitation.</p>`
    : ''

export function signUpPage(
  context: PageContext,
  values: Record<string, string>,
  errors: FormErrors = {},
  next?: string,
): Html {
  return layout(
    'Sign up',
    context,
    html`<div class="card narrow">
<h1>Create your account</h1>
${returnNote(next)}
${errors.form ? html`<div class="alert error" role="alert">${errors.form}</div>` : ''}
<form method="post" action="/sign-up" novalidate>
${csrfInput(context.csrf)}${nextInput(next)}
${field({ name: 'email', label: 'Email', type: 'email', value: values.email, error: errors.email, required: true, autocomplete: 'email' })}
${field({ name: 'password', label: 'Password', type: 'password', error: errors.password, hint: 'at least 10 characters', required: true, autocomplete: 'new-password' })}
${field({ name: 'account_name', label: 'Account name', value: values.account_name, error: errors.account_name, hint: 'your company or team', required: true, autocomplete: 'organization' })}
<p><button type="submit">Sign up</button></p>
</form>
<p class="hint">Already have an account? <a href="${withNext('/sign-in', next)}">Sign in</a></p>
</div>`,
  )
}

export function signInPage(
  context: PageContext,
  values: Record<string, string>,
  errors: FormErrors = {},
  next?: string,
): Html {
  return layout(
    'Sign in',
    context,
    html`<div class="card narrow">
<h1>Sign in</h1>
${returnNote(next)}
${errors.form ? html`<div class="alert error" role="alert">${errors.form}</div>` : ''}
<form method="post" action="/sign-in" novalidate>
${csrfInput(context.csrf)}${nextInput(next)}
${field({ name: 'email', label: 'Email', type: 'email', value: values.email, required: true, autocomplete: 'email' })}
${field({ name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' })}
<p><button type="submit">Sign in</button></p>
</form>
<p class="hint">New here? <a href="${withNext('/sign-up', next)}">Create an account</a></p>
</div>`,
  )
}

export function newAccountPage(context: PageContext, values: Record<string, string>, errors: FormErrors = {}): Html {
  return layout(
    'New account',
    context,
    html`<div class="card narrow">
<h1>New account</h1>
<p class="hint">A separate set of contacts and API keys. You will be its owner.</p>
<form method="post" action="/app/accounts" novalidate>
${csrfInput(context.csrf)}
${field({ name: 'name', label: 'Account name', value: values.name, error: errors.name, required: true })}
<p><button type="submit">Create account</button></p>
</form>
</div>`,
  )
}
