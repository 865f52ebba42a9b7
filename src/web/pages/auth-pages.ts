// Sign-up, sign-in and new-account forms.
import { type Html, html } from '../html.js'
import { withNext } from '../next-path.js'
import { csrfInput, field, layout, narrowCardPage, type PageContext } from './layout.js'

export type FormErrors = Record<string, string | undefined> & { form?: string }

/** Where the person goes once signed in (an invitation link), carried through the form. */
const nextInput = (next: string | undefined) => (next ? html`<input type="hidden" name="next" value="${next}">` : '')
const returnNote = (next: string | undefined) =>
  next?.startsWith('/invitations/')
    ? html`<p class="alert ok" role="status">Then you return to your invitation.</p>`
    : ''

/** The frame the sign-up and sign-in forms share: `fields` are the form's own inputs. */
function authPage(
  context: PageContext,
  page: { title: string; heading: string; action: string; fields: Html; submit: string; switchTo: Html },
  errors: FormErrors,
  next: string | undefined,
): Html {
  return narrowCardPage(
    page.title,
    context,
    page.heading,
    html`${returnNote(next)}
${errors.form ? html`<div class="alert error" role="alert">${errors.form}</div>` : ''}
<form method="post" action="${page.action}" novalidate>
${csrfInput(context.csrf)}${nextInput(next)}
${page.fields}
<p><button type="submit">${page.submit}</button></p>
</form>
<p class="hint">${page.switchTo}</p>
`,
  )
}

export function signUpPage(
  context: PageContext,
  values: Record<string, string>,
  errors: FormErrors = {},
  next?: string,
): Html {
  const fields = html`${field({ name: 'email', label: 'Email', type: 'email', value: values.email, error: errors.email, required: true, autocomplete: 'email' })}
${field({ name: 'password', label: 'Password', type: 'password', error: errors.password, hint: 'at least 10 characters', required: true, autocomplete: 'new-password' })}
${field({ name: 'account_name', label: 'Account name', value: values.account_name, error: errors.account_name, hint: 'your company or team', required: true, autocomplete: 'organization' })}`
  const switchTo = html`Already have an account? <a href="${withNext('/sign-in', next)}">Sign in</a>`
  const page = { title: 'Sign up', heading: 'Create your account', action: '/sign-up', submit: 'Sign up' }
  return authPage(context, { ...page, fields, switchTo }, errors, next)
}

export function signInPage(
  context: PageContext,
  values: Record<string, string>,
  errors: FormErrors = {},
  next?: string,
): Html {
  const fields = html`${field({ name: 'email', label: 'Email', type: 'email', value: values.email, required: true, autocomplete: 'email' })}
${field({ name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' })}`
  const switchTo = html`New here? <a href="${withNext('/sign-up', next)}">Create an account</a>`
  const page = { title: 'Sign in', heading: 'Sign in', action: '/sign-in', submit: 'Sign in' }
  return authPage(context, { ...page, fields, switchTo }, errors, next)
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
