// HTML templating: a tagged template that escapes every interpolated value unless it is already
// Html (another template, or raw() for trusted constant markup). Escaping is the default.
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)

type Value = Html | string | number | boolean | null | undefined | Value[]

function render(value: Value): string {
  if (value instanceof Html) {
    return value.value
  }
  if (Array.isArray(value)) {
    return value.map(render).join('')
  }
  if (value === null || value === undefined || value === false) {
    return ''
  }
  return escapeHtml(String(value))
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] ?? ''
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '')
  })
  return new Html(out)
}

/** Trusted markup (never user input): server-generated SVG, constant snippets. */
export const raw = (markup: string): Html => new Html(markup)
