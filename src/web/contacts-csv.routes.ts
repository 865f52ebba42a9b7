// CSV export and import of an account's contacts under /app/:accountId/contacts: the export streams
// every contact; the import is all or nothing and reports each problem by row and column.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { enforceContactQuota } from '../contacts/contact-count.js'
import { CSV_COLUMNS, exportContactsCsv } from '../contacts/contacts.csv-export.js'
import {
  IMPORT_MAX_BYTES,
  IMPORT_MAX_ROWS,
  type ImportError,
  parseContactsCsv,
} from '../contacts/contacts.csv-import.js'
import { type ImportSummary, importContacts } from '../contacts/contacts.import.js'
import { ruleErrors } from '../contacts/contacts.messages.js'
import { retryOnConflict } from '../contacts/contacts.store.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { importPage } from './pages/contacts-pages.js'
import type { Render } from './render.js'
import { accountContext } from './request-context.js'
import { isValidCsrf } from './session.js'

export const contactsCsvRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; render: Render }> = async (
  app,
  { deps, render },
) => {
  const { db } = deps.database
  const now = () => deps.clock.now().toISOString()

  app.get('/contacts/export.csv', async (request, reply) => {
    const { account } = accountContext(request)
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="contacts.csv"')
      .header('cache-control', 'no-store')
      .send(exportContactsCsv(db, account.id))
  })

  const importView = (accountId: string) => ({
    accountId,
    columns: CSV_COLUMNS,
    maxRows: IMPORT_MAX_ROWS,
    maxMiB: IMPORT_MAX_BYTES / 1024 / 1024,
  })

  app.get('/contacts/import', async (request, reply) => {
    const { account } = accountContext(request)
    return render(request, reply, (c) => importPage(c, importView(account.id)))
  })

  app.post('/contacts/import', { config: { acceptsFile: true } }, async (request, reply) => {
    const { account } = accountContext(request)
    const view = importView(account.id)
    const refuse = (status: number, formError: string) =>
      render(request, reply, (c) => importPage(c, { ...view, formError }), status)
    // A urlencoded post passed the CSRF check of the preValidation hook (web.routes.ts), but carries
    // no file.
    if (!request.isMultipart()) {
      return refuse(400, 'Choose a CSV file to import.')
    }
    // The token must come before the file, so the file is read only for a genuine form.
    let csrf: unknown
    let file: Buffer | undefined
    let refused = false
    try {
      for await (const part of request.parts()) {
        if (part.type === 'field') {
          if (part.fieldname === '_csrf' && csrf === undefined) {
            csrf = part.value
          }
        } else if (refused || !isValidCsrf(request, deps.secret, csrf)) {
          refused = true
          part.file.resume()
        } else {
          const content = await part.toBuffer()
          if (part.fieldname === 'file' && file === undefined) {
            file = content
          }
        }
      }
    } catch (error) {
      const { statusCode, code } = error as { statusCode?: number; code?: string }
      if (statusCode === 413) {
        return refuse(
          413,
          code === 'FST_REQ_FILE_TOO_LARGE'
            ? `The file is larger than ${view.maxMiB} MiB: split it into smaller files and import them one by one.`
            : 'Send the form with one CSV file only.',
        )
      }
      throw error
    }
    if (refused || !isValidCsrf(request, deps.secret, csrf)) {
      return refuse(403, FORM_EXPIRED)
    }
    if (file === undefined || file.length === 0) {
      return refuse(400, 'Choose a CSV file to import: the file was missing or empty.')
    }

    const parsed = parseContactsCsv(file)
    const report = (errors: ImportError[]) => render(request, reply, (c) => importPage(c, { ...view, errors }), 400)
    if (!parsed.ok) {
      return report(parsed.errors)
    }
    let result: ImportSummary
    try {
      const at = now()
      result = await retryOnConflict(
        db,
        async (trx) => {
          const summary = await importContacts(trx, account.id, parsed.rows, at, { replaceCustomFields: true })
          if (summary.created > 0) {
            // All or nothing, like the rest of the import: past the quota, nothing is written.
            await enforceContactQuota(trx, account.id, deps.config.maxContactsPerAccount)
          }
          return summary
        },
        'The contacts are being changed by other requests; retry shortly.',
      )
    } catch (error) {
      const described = ruleErrors(error)
      const row = error instanceof AppError ? Number(error.options.extensions?.row) : Number.NaN
      if (described) {
        return report(described.map((e) => ({ row: Number.isNaN(row) ? 0 : row + 2, ...e })))
      }
      throw error
    }
    return render(request, reply, (c) => importPage(c, { ...view, result }))
  })
}

const FORM_EXPIRED = 'The form expired or did not come from this site. Reload the page and choose the file again.'
