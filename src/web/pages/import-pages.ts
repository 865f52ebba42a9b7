// CSV import pages: the upload form, and one job's page (progress while it runs, then its result
// or every problem by row, column and value).
import { IMPORT_PROBLEMS_KEPT, type ImportError, PROBLEM_VALUE_MAX } from '../../imports/import-csv.js'
import type { ImportJob } from '../../imports/imports.store.js'
import { type Html, html } from '../html.js'
import { csrfInput, layout, type PageContext } from './layout.js'

/** `home`: the root path of the page's mode (request-context.ts homeOf). */
const contactsUrl = (home: string) => `${home}/contacts`

export interface ImportFormView {
  home: string
  columns: readonly string[]
  maxRows: number
  maxMiB: number
  /** Why the upload was refused as a whole (too large, no file, an import already running, the budget). */
  formError?: string
  /** The account's import still running, when a second one was refused. */
  runningId?: string
}

export function importPage(context: PageContext, data: ImportFormView): Html {
  const base = contactsUrl(data.home)
  return layout(
    'Import contacts',
    { ...context, section: 'contacts' },
    html`<p><a href="${base}">← Contacts</a></p>
<h1>Import contacts from CSV</h1>
${
  data.formError
    ? html`<div class="alert error" role="alert">${data.formError}${
        data.runningId ? html` <a href="${base}/imports/${data.runningId}">See its progress</a>.` : ''
      }</div>`
    : ''
}
${importForm(context, data)}`,
  )
}

function importForm(context: PageContext, data: ImportFormView): Html {
  const base = contactsUrl(data.home)
  return html`<div class="card"><form method="post" action="${base}/import" enctype="multipart/form-data">
${csrfInput(context.csrf)}
<label for="f-file">CSV file <span class="hint">UTF-8, at most ${data.maxMiB} MiB and ${data.maxRows.toLocaleString('en')} rows</span></label>
<input id="f-file" name="file" type="file" accept=".csv,text/csv" required aria-describedby="import-help">
<div id="import-help" class="hint">
<p>The first row names the columns: those of the export (${data.columns.join(', ')}). <strong>email</strong> is required in every row: a contact with the same email is updated, others are created. id, created_at and updated_at are ignored; a column you leave out is left unchanged; an empty cell clears the field.</p>
<p>Tags are separated by semicolons; custom_fields is a JSON object. Every row is checked first: if any row has a problem, nothing is imported. The import runs in the background: you can leave its page and come back.</p>
</div>
<p><button type="submit">Import</button> <a class="button secondary" href="${base}">Cancel</a></p>
</form></div>`
}

const STATE_TEXT = {
  queued: 'Waiting to start: other imports are running.',
  validating: 'Checking every row…',
  writing: 'Every row is valid. Writing the contacts…',
} as const

// Control characters (a NUL above all, which HTML may not hold) are shown as their Unicode
// control pictures, ␀ for U+0000: the report shows where the bad byte is instead of hiding it.
const visible = (text: string) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
  text.replace(/[\u0000-\u001f\u007f]/g, (c) => String.fromCharCode(c === '\u007f' ? 0x2421 : 0x2400 + c.charCodeAt(0)))

// Jobs stored before the parser cut cells to PROBLEM_VALUE_MAX kept the whole cell: cut here.
const shownValue = ({ value = '', valueLength }: ImportError) =>
  visible(
    valueLength !== undefined
      ? `${value}… (${valueLength} characters)`
      : value.length > PROBLEM_VALUE_MAX
        ? `${value.slice(0, PROBLEM_VALUE_MAX)}… (${value.length} characters)`
        : value,
  )

function errorRows(errors: ImportError[]): Html {
  return html`${errors.map(
    (e) =>
      html`<tr><td data-label="Row">${e.row === 0 ? 'file' : e.row}</td><td class="mono" data-label="Column">${visible(e.field)}</td><td class="mono" data-label="Value">${e.value === undefined ? '' : shownValue(e)}</td><td data-label="What to fix">${e.message}</td></tr>`,
  )}`
}

/** One import: progress while it runs (the page reloads itself: a Refresh header), then the outcome. */
export function importJobPage(context: PageContext, data: ImportFormView & { job: ImportJob }): Html {
  const { job } = data
  const base = contactsUrl(data.home)
  const total = job.rows_total
  let body: Html
  if (job.state === 'done') {
    body = html`<div class="alert ok" role="status">Import finished: ${job.created} created, ${job.updated} updated, ${job.unchanged} unchanged.</div>
<p><a class="button" href="${base}">Back to contacts</a> <a class="button secondary" href="${base}/import">Import another file</a></p>`
  } else if (job.state === 'failed') {
    const partial = job.rows_written > 0
    body = html`<div class="alert error" role="alert">${
      partial
        ? `The import stopped after writing ${job.rows_written} of ${total ?? '?'} rows: ${job.error_count} problem${job.error_count === 1 ? '' : 's'} found. The rows before it were imported.`
        : `Nothing was imported: ${job.error_count} problem${job.error_count === 1 ? '' : 's'} found. Fix ${job.error_count === 1 ? 'it' : 'them'} in ${job.file_name} and import it again.`
    }</div>
<div class="table-wrap"><table class="cards import-errors"><caption class="hint">Row numbers count the header as row 1, as a spreadsheet does.</caption>
<thead><tr><th>Row</th><th>Column</th><th>Value</th><th>What to fix</th></tr></thead><tbody>
${errorRows(job.errors.slice(0, IMPORT_PROBLEMS_KEPT))}
${job.error_count > IMPORT_PROBLEMS_KEPT ? html`<tr><td colspan="4" class="hint">…and ${job.error_count - IMPORT_PROBLEMS_KEPT} more.</td></tr>` : ''}
</tbody></table></div>
<h2>Import the corrected file</h2>
${importForm(context, data)}`
  } else {
    body = html`<div class="alert warn" role="status" data-import-state="${job.state}">${STATE_TEXT[job.state]}</div>
<p>Rows checked: <strong data-rows-validated>${job.rows_validated}</strong>${total === null ? '' : html` of ${total}`} · rows written: <strong data-rows-written>${job.rows_written}</strong>${total === null ? '' : html` of ${total}`}</p>
<p class="hint">This page reloads itself every 2 seconds until the import is over; you can leave it and come back.</p>`
  }
  return layout(
    `Import ${job.file_name}`,
    { ...context, section: 'contacts' },
    html`<p><a href="${base}">← Contacts</a></p>
<h1>Import of ${job.file_name}</h1>
<p class="hint" data-import-id="${job.id}">Started <time datetime="${job.created_at}">${job.created_at.slice(0, 16).replace('T', ' ')} UTC</time></p>
${body}`,
  )
}
