// Ajv's errors translated into one error per field, each a line a client can act on.
import type { FastifyError } from 'fastify'
import type { FieldError } from './errors.js'

const READ_ONLY_FIELDS = new Set(['id', 'object', 'account_id', 'created_at', 'updated_at'])

/** One of Ajv's errors, with the schema it failed (Ajv runs with verbose: true, http/validation.ts). */
interface Issue {
  instancePath: string
  keyword: string
  params: Record<string, unknown>
  message?: string
  parentSchema?: { type?: unknown; minimum?: number; maximum?: number; format?: unknown }
}

/** What a field error says, and how it merges with the others Ajv reports for the same field. */
type Finding = { field: string } & (
  | { kind: 'rule'; message: string }
  | { kind: 'type'; types: string[] }
  | { kind: 'choice'; values: string[] }
)

const UNIONS = new Set(['anyOf', 'oneOf'])

/**
 * Whether an error only echoes a union's other branches: a value that fails Nullable(X) also fails
 * "must be null" and "anyOf", which say nothing when a branch failed on a rule of its own.
 */
function isUnionNoise(issue: Issue, issues: readonly Issue[]): boolean {
  if (UNIONS.has(issue.keyword)) {
    return issues.some((other) => !UNIONS.has(other.keyword))
  }
  if (issue.keyword !== 'type') {
    return false
  }
  return issues.some(
    (other) =>
      !UNIONS.has(other.keyword) &&
      (other.instancePath.startsWith(`${issue.instancePath}/`) ||
        (other.instancePath === issue.instancePath && other.keyword !== 'type')),
  )
}

const FORMAT_TEXT: Record<string, string> = {
  'date-time': 'an RFC 3339 date-time, e.g. 2026-01-31T09:00:00Z',
  email: 'an email address',
  uri: 'an absolute URL',
}

const plural = (count: unknown, one: string) => `${count} ${one}${count === 1 ? '' : 's'}`

function findingOf(issue: Issue, error: FastifyError): Finding {
  const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.')
  const { params } = issue
  const at = path || error.validationContext || 'body'
  const rule = (message: string): Finding => ({ field: at, kind: 'rule', message })
  switch (issue.keyword) {
    case 'additionalProperties': {
      const name = String(params.additionalProperty)
      const field = path ? `${path}.${name}` : name
      if (path === 'custom_fields') {
        return {
          field,
          kind: 'rule',
          message: 'is not a valid custom field key: use 1-40 letters, digits or underscores',
        }
      }
      return {
        field,
        kind: 'rule',
        message: READ_ONLY_FIELDS.has(name) && !path ? 'is read-only' : 'is not a known field',
      }
    }
    case 'required': {
      const name = String(params.missingProperty)
      return { field: path ? `${path}.${name}` : name, kind: 'rule', message: 'is required' }
    }
    case 'enum':
      return { field: at, kind: 'choice', values: (params.allowedValues as unknown[]).map(String) }
    case 'const':
      return { field: at, kind: 'choice', values: [String(params.allowedValue)] }
  }
  const schema = issue.parentSchema
  if (schema?.type === 'integer' && schema.minimum !== undefined && schema.maximum !== undefined) {
    return rule(`must be an integer from ${schema.minimum} to ${schema.maximum}`)
  }
  switch (issue.keyword) {
    case 'type':
      return { field: at, kind: 'type', types: String(params.type).split(',') }
    case 'minLength':
      return rule(params.limit === 1 ? 'must not be empty' : `must be at least ${plural(params.limit, 'character')}`)
    case 'maxLength':
      return rule(`must be at most ${plural(params.limit, 'character')}`)
    case 'minItems':
      return rule(`must have at least ${plural(params.limit, 'item')}`)
    case 'maxItems':
      return rule(`must have at most ${plural(params.limit, 'item')}`)
    case 'maxProperties':
      return rule(`must have at most ${plural(params.limit, 'key')}`)
    case 'uniqueItems':
      return rule('must not repeat an item')
    case 'format': {
      const format = String(params.format)
      return rule(`must be ${FORMAT_TEXT[format] ?? `in the format ${format}`}`)
    }
    case 'pattern':
      if (params.pattern === '\\S') {
        return rule('must not be blank')
      }
      if (params.pattern === '^/') {
        return rule('must start with /')
      }
  }
  return rule(issue.message ?? 'is invalid')
}

const TYPE_TEXT: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
}

/** "a, b or c" */
const oneOf = (items: string[]): string =>
  items.length > 1 ? `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}` : (items[0] ?? '')

/** One error per field: a rule it broke if any, else the values or types it may take, merged. */
function perField(findings: Finding[]): FieldError[] {
  const fields = new Map<string, Finding[]>()
  for (const finding of findings) {
    fields.set(finding.field, [...(fields.get(finding.field) ?? []), finding])
  }
  return [...fields].map(([field, all]) => {
    const rule = all.find((finding) => finding.kind === 'rule')
    if (rule) {
      return { field, message: rule.message }
    }
    const values = [...new Set(all.flatMap((finding) => (finding.kind === 'choice' ? finding.values : [])))]
    if (values.length > 0) {
      return { field, message: values.length === 1 ? `must be ${values[0]}` : `must be one of ${values.join(', ')}` }
    }
    const types = [...new Set(all.flatMap((finding) => (finding.kind === 'type' ? finding.types : [])))]
    return { field, message: `must be ${oneOf(types.map((type) => TYPE_TEXT[type] ?? type))}` }
  })
}

/** The field errors of a failed validation, one per field. */
export function fieldErrorsOf(error: FastifyError): FieldError[] {
  const issues = (error.validation ?? []) as Issue[]
  return perField(issues.filter((issue) => !isUnionNoise(issue, issues)).map((i) => findingOf(i, error)))
}
