// Contacts pages: list, search, create, edit, delete (CSV: contacts-csv.routes.ts). Inputs go through
// the API's schemas and rules and are written by the contact service, so the pages and the API
// cannot disagree.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType } from '@sinclair/typebox/errors'
import type { FastifyRequest } from 'fastify'
import type { Tenant } from '../accounts/tenant.js'
import { contactFieldsAsText, parseStoredContact } from '../contacts/contacts.js'
import { listContactRows } from '../contacts/contacts.list-query.js'
import { checkContactInput, ruleErrors } from '../contacts/contacts.messages.js'
import { type Contact, type ContactInput, ListContactsQuery } from '../contacts/contacts.schemas.js'
import { findStoredBody } from '../db/stored-body.js'
import type { Deps } from '../deps.js'
import { AppError, type FieldError } from '../http/errors.js'
import { type CursorScope, decodeCursor, encodeCursor } from '../http/pagination.js'
import { FormBody, formValues } from './forms.js'
import { noticeOf } from './notices.js'
import {
  badListRequestPage,
  CONTACT_FORM_FIELDS,
  type ContactFormErrors,
  type ContactFormField,
  type ContactFormValues,
  contactFormPage,
  contactsListPage,
  deleteContactPage,
} from './pages/contacts-pages.js'
import type { Render } from './render.js'
import { accountContext } from './request-context.js'

export const CONTACTS_PAGE_SIZE = 50

const NOTICES = new Map([
  ['created', 'The contact was created.'],
  ['updated', 'The contact was saved.'],
  ['deleted', 'The contact was deleted.'],
])

/**
 * A query parameter as parsed: text, or a list when repeated. Checked by the handler, after the
 * membership check, so a bad link gets a page that says what is wrong.
 */
const QueryValue = Type.Union([Type.String(), Type.Array(Type.String())])
const ContactsListQuery = Type.Object({
  q: Type.Optional(QueryValue),
  tag: Type.Optional(QueryValue),
  after: Type.Optional(QueryValue),
  notice: Type.Optional(QueryValue),
})
/** Any text: an id that is not one of this account's contacts, well-formed or not, is the 404 page. */
const ContactParams = Type.Object({ id: Type.String() })
const ContactForm = FormBody(CONTACT_FORM_FIELDS)
const DeleteContactForm = FormBody([])

const ListFilters = TypeCompiler.Compile(Type.Pick(ListContactsQuery, ['q', 'tag', 'after']))
const FILTER_NAMES: Record<string, string> = { q: 'search', tag: 'tag' }

const notFound = () => new AppError('not_found', 'No contact with this id exists in this account.')

/** The form's text as an input: trimmed, '' clears the field (null), tags split on commas. */
function formInput(values: ContactFormValues): ContactInput {
  const text = (value: string) => (value.trim() === '' ? null : value.trim())
  const tags = values.tags
    .split(',')
    .map((tag) => tag.trim())
    .filter((tag) => tag !== '')
  return {
    email: text(values.email),
    first_name: text(values.first_name),
    last_name: text(values.last_name),
    phone: text(values.phone),
    company: text(values.company),
    job_title: text(values.job_title),
    tags,
  } satisfies Required<Pick<ContactInput, ContactFormField>>
}

function formErrors(errors: FieldError[]): ContactFormErrors {
  const out: ContactFormErrors = {}
  for (const { field, message } of errors) {
    const name = (CONTACT_FORM_FIELDS as readonly string[]).includes(field)
      ? (field as keyof ContactFormErrors)
      : 'form'
    out[name] ??= message
  }
  return out
}

function contactFormValues(contact: Contact): ContactFormValues {
  const text = contactFieldsAsText(contact, ', ')
  return Object.fromEntries(CONTACT_FORM_FIELDS.map((name) => [name, text[name]])) as ContactFormValues
}

export const contactsPagesRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; render: Render }> = async (
  app,
  { deps, render },
) => {
  const { db } = deps.database
  const base = (home: string) => `${home}/contacts`

  async function findContactOr404(tenant: Tenant, id: string): Promise<Contact> {
    const body = await findStoredBody(db, 'contacts', tenant.id, id)
    if (body === undefined) {
      throw notFound()
    }
    return parseStoredContact(body)
  }

  app.get('/contacts', { schema: { querystring: ContactsListQuery } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const { query } = request
    const bad = (message: string) => render(request, reply, (c) => badListRequestPage(c, { home, message }), 400)

    const filters: { q?: string; tag?: string; after?: string } = {}
    for (const name of ['q', 'tag', 'after'] as const) {
      const value = query[name]
      if (Array.isArray(value)) {
        return bad(`The link repeats the ${FILTER_NAMES[name] ?? 'page'} parameter: use it once.`)
      }
      const text = typeof value === 'string' ? value.trim() : ''
      if (text !== '') {
        filters[name] = text
      }
    }
    const invalid = ListFilters.Errors(filters).First()
    if (invalid) {
      const name = invalid.path.slice(1)
      const maxLength = (invalid.schema as { maxLength?: number }).maxLength
      return bad(
        name in FILTER_NAMES && invalid.type === ValueErrorType.StringMaxLength
          ? `The ${FILTER_NAMES[name]} is too long: shorten it to at most ${maxLength} characters.`
          : 'This page link is not valid. Start again from the first page.',
      )
    }
    const { q, tag, after } = filters
    // The API's scope for the same query (order defaults to asc), so a cursor means the same in both.
    const scope: CursorScope = { list: 'contacts', accountId: tenant.id, filters: { order: 'asc', q, tag } }
    let afterId: string | undefined
    try {
      afterId = after === undefined ? undefined : decodeCursor(deps.secret, scope, after)
    } catch (error) {
      if (error instanceof AppError && error.code === 'invalid_cursor') {
        return bad(
          'This “Next page” link is not valid for this search: it was changed, or the search changed since. Start again from the first page.',
        )
      }
      throw error
    }
    // Bounded like the API's list: a search examines at most a window of contacts per page, so a
    // page may be short, even empty, with a next link that continues the search.
    const { rows, scannedTo } = await listContactRows(db, tenant.id, {
      order: 'asc',
      ...(q === undefined ? {} : { q }),
      ...(tag === undefined ? {} : { tag }),
      afterId,
      fetch: CONTACTS_PAGE_SIZE + 1,
    })
    const page = rows.slice(0, CONTACTS_PAGE_SIZE)
    const link = (cursor?: string) => {
      const params = new URLSearchParams()
      if (q !== undefined) {
        params.set('q', q)
      }
      if (tag !== undefined) {
        params.set('tag', tag)
      }
      if (cursor !== undefined) {
        params.set('after', cursor)
      }
      const search = params.toString()
      return search ? `${base(home)}?${search}` : base(home)
    }
    const last = page[page.length - 1]
    const notice = noticeOf(NOTICES, query.notice)
    return render(request, reply, (c) =>
      contactsListPage(c, {
        home,
        contacts: page.map((row) => parseStoredContact(row.body)),
        q: q ?? '',
        tag: tag ?? '',
        ...(rows.length > CONTACTS_PAGE_SIZE && last
          ? { nextHref: link(encodeCursor(deps.secret, scope, last.id)) }
          : scannedTo !== undefined
            ? { nextHref: link(encodeCursor(deps.secret, scope, scannedTo)) }
            : {}),
        ...(after !== undefined ? { firstHref: link() } : {}),
        ...(notice ? { notice } : {}),
      }),
    )
  })

  app.get('/contacts/new', async (request, reply) => {
    const { home } = accountContext(request)
    const values = Object.fromEntries(CONTACT_FORM_FIELDS.map((name) => [name, ''])) as ContactFormValues
    return render(request, reply, (c) => contactFormPage(c, { home, values }))
  })

  /**
   * Validates and saves, true; on a problem renders the form with what to fix, false. Not the reply:
   * a reply is a thenable, which `await` would read as undefined.
   */
  async function saveContact(
    request: FastifyRequest,
    reply: Parameters<Render>[1],
    home: string,
    contact: Contact | undefined,
    save: (input: ContactInput) => Promise<unknown>,
  ): Promise<boolean> {
    const values = formValues(request, [...CONTACT_FORM_FIELDS])
    const input = formInput(values)
    const again = (errors: ContactFormErrors, status: number, existingId?: string) => {
      render(
        request,
        reply,
        (c) =>
          contactFormPage(c, {
            home,
            values,
            errors,
            ...(contact ? { contact } : {}),
            ...(existingId ? { existingId } : {}),
          }),
        status,
      )
      return false
    }
    const errors = checkContactInput(input)
    if (errors.length > 0) {
      return again(formErrors(errors), 400)
    }
    try {
      await save(input)
    } catch (error) {
      if (error instanceof AppError && error.code === 'contact_exists') {
        return again(
          {
            form: 'Another contact already has this email.',
            email: 'Use a different email, or edit the contact that has it.',
          },
          409,
          error.options.extensions?.existing_id,
        )
      }
      const described = ruleErrors(error)
      if (described) {
        return again(formErrors(described), 400)
      }
      throw error
    }
    return true
  }

  app.post('/contacts', { schema: { body: ContactForm }, attachValidation: true }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const saved = await saveContact(request, reply, home, undefined, (input) => deps.contacts.create(tenant, input))
    return saved ? reply.redirect(`${base(home)}?notice=created`, 303) : reply
  })

  app.get('/contacts/:id', { schema: { params: ContactParams } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const contact = await findContactOr404(tenant, request.params.id)
    return render(request, reply, (c) => contactFormPage(c, { home, contact, values: contactFormValues(contact) }))
  })

  app.post(
    '/contacts/:id',
    { schema: { params: ContactParams, body: ContactForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      const contact = await findContactOr404(tenant, request.params.id)
      const saved = await saveContact(request, reply, home, contact, async (input) => {
        if (!(await deps.contacts.update(tenant, contact.id, input))) {
          throw notFound()
        }
      })
      return saved ? reply.redirect(`${base(home)}?notice=updated`, 303) : reply
    },
  )

  app.get('/contacts/:id/delete', { schema: { params: ContactParams } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const contact = await findContactOr404(tenant, request.params.id)
    return render(request, reply, (c) => deleteContactPage(c, { home, contact }))
  })

  app.post(
    '/contacts/:id/delete',
    { schema: { params: ContactParams, body: DeleteContactForm }, attachValidation: true },
    async (request, reply) => {
      const { tenant, home } = accountContext(request)
      if (!(await deps.contacts.remove(tenant, request.params.id))) {
        throw notFound()
      }
      return reply.redirect(`${base(home)}?notice=deleted`, 303)
    },
  )
}
