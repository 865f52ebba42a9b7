// CSV export and import of an account's contacts: the export streams; an upload is stored as an
// import job (src/imports/), whose page shows its progress, then its result or each problem.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import {
  CSV_COLUMNS,
  type ExportPageReader,
  exportContactsCsv,
  readExportPage,
} from '../contacts/contacts.csv-export.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { IMPORT_MAX_BYTES, IMPORT_MAX_ROWS } from '../imports/import-csv.js'
import {
  countImportsSince,
  deleteImportFile,
  deleteStrayImportParts,
  findImport,
  findUnfinishedImportId,
  insertImport,
  isFinished,
  writeImportFile,
} from '../imports/imports.store.js'
import { newId } from '../lib/ids.js'
import { importJobPage, importPage } from './pages/import-pages.js'
import type { Render } from './render.js'
import { accountContext } from './request-context.js'
import { isValidCsrf } from './session.js'

const ImportParams = Type.Object({ importId: Type.String() })
const FILE_NAME_MAX = 200
/** Seconds between reloads of a running import's page (the Refresh header: no script, CSP intact). */
const REFRESH_S = 2

export const contactsCsvRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; render: Render }> = async (
  app,
  { deps, render },
) => {
  const { db } = deps.database
  const { csvWorker } = deps.imports
  // On an SQLite file the import's worker thread reads and writes the pages on its own connection.
  const exportPages =
    (accountId: string): ExportPageReader =>
    (afterId) =>
      csvWorker.ownConnection ? csvWorker.exportPage(accountId, afterId) : readExportPage(db, accountId, afterId)

  app.get('/contacts/export.csv', async (request, reply) => {
    const { tenant } = accountContext(request)
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="contacts.csv"')
      .header('cache-control', 'no-store')
      .send(exportContactsCsv(exportPages(tenant.id)))
  })

  const importView = (home: string) => ({
    home,
    columns: CSV_COLUMNS,
    maxRows: IMPORT_MAX_ROWS,
    maxMiB: IMPORT_MAX_BYTES / 1024 / 1024,
  })

  app.get('/contacts/import', async (request, reply) => {
    const { home } = accountContext(request)
    return render(request, reply, (c) => importPage(c, importView(home)))
  })

  app.post('/contacts/import', { config: { acceptsFile: true } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const view = importView(home)
    const refuse = (status: number, formError: string) =>
      render(request, reply, (c) => importPage(c, { ...view, formError }), status)
    // A urlencoded post passed the CSRF check (web.routes.ts) but carries no file.
    if (!request.isMultipart()) {
      return refuse(400, 'Choose a CSV file to import.')
    }
    // The token must come before the file, so the file is read only for a genuine form.
    let csrf: unknown
    let file: Buffer | undefined
    let fileName = 'file.csv'
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
            fileName = part.filename || fileName
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

    const at = deps.clock.now()
    const hourAgo = new Date(at.getTime() - 3600_000).toISOString()
    if ((await countImportsSince(db, tenant.id, hourAgo)) >= deps.config.imports.perHour) {
      return refuse(
        429,
        `This account has started ${deps.config.imports.perHour} imports in the last hour, its limit: try again later.`,
      )
    }
    const refuseRunning = (runningId: string | undefined) =>
      render(
        request,
        reply,
        (c) =>
          importPage(c, {
            ...view,
            formError: 'Another import of this account is still running: wait until it is over, then import this file.',
            ...(runningId ? { runningId } : {}),
          }),
        409,
      )
    const running = await findUnfinishedImportId(db, tenant.id)
    if (running !== undefined) {
      return refuseRunning(running)
    }
    // No unfinished job: whatever parts are an hour old belong to no job.
    await deleteStrayImportParts(db, tenant.id, hourAgo)
    const id = newId('contactImport')
    const now = at.toISOString()
    // The parts first, the job's row last: a runner claims only a job whose file is whole.
    await writeImportFile(db, tenant.id, id, file, now)
    try {
      await insertImport(db, tenant.id, { id, fileName: fileName.slice(0, FILE_NAME_MAX), now })
    } catch (error) {
      await deleteImportFile(db, tenant.id, id)
      if (!isUniqueViolation(error)) {
        throw error
      }
      // One unfinished import per account (a partial unique index): another upload won the race.
      return refuseRunning(await findUnfinishedImportId(db, tenant.id))
    }
    deps.imports.wake()
    return reply.redirect(`${home}/contacts/imports/${id}`, 303)
  })

  app.get('/contacts/imports/:importId', { schema: { params: ImportParams } }, async (request, reply) => {
    const { tenant, home } = accountContext(request)
    const job = await findImport(db, tenant.id, request.params.importId)
    if (!job) {
      throw new AppError('not_found', 'No import with this id exists in this account.')
    }
    if (!isFinished(job.state)) {
      reply.header('refresh', String(REFRESH_S))
    }
    return render(request, reply, (c) => importJobPage(c, { ...importView(home), job }))
  })
}

const FORM_EXPIRED = 'The form expired or did not come from this site. Reload the page and choose the file again.'
