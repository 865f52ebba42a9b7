// Ajv set-up: bodies are validated strictly (no coercion, no silent stripping of unknown
// fields); query strings and path parameters are text, so numbers there are coerced.

import { Ajv, type Options, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'
import { normalizeEmail } from '../lib/email.js'
import { isRfc3339DateTime } from './schemas.js'

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default

function makeAjv(options: Options): Ajv {
  // verbose: errors carry their schema, so messages can state the allowed range.
  const ajv = new Ajv({
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
    verbose: true,
    ...options,
  })
  addFormats(ajv)
  // `format: email` means the address rule the API stores by (lib/email.ts), padding included
  // since it is trimmed: one rule, whether the schema or the merge step meets a bad address first.
  ajv.addFormat('email', (value: string) => normalizeEmail(value) !== undefined)
  ajv.addFormat('date-time', isRfc3339DateTime)
  return ajv
}

/**
 * One pair of Ajv instances per process: Ajv keeps what it compiled by schema object, and the route
 * schemas are module constants, so a second app in the process (a test harness) compiles nothing again.
 */
let ajvs: { forBodies: Ajv; forText: Ajv } | undefined

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  ajvs ??= { forBodies: makeAjv({ coerceTypes: false }), forText: makeAjv({ coerceTypes: true }) }
  const { forBodies, forText } = ajvs
  return ({ schema, httpPart }) =>
    httpPart === 'body'
      ? forBodies.compile(schema as object)
      : integersAsDigits(schema, forText.compile(schema as object))
}

interface PropertySchema {
  type?: unknown
}

/**
 * An integer in a query string or path is plain decimal digits (docs/design.md#pagination): Ajv's
 * coercion would also read `1e2`, `0x10`, `+5`, ` 5` or `1.0`. Such a value fails as a wrong type.
 */
function integersAsDigits(schema: unknown, validate: ValidateFunction): ValidateFunction {
  const properties = (schema as { properties?: Record<string, PropertySchema> }).properties ?? {}
  const integers = Object.entries(properties).filter(([, property]) => property.type === 'integer')
  if (integers.length === 0) {
    return validate
  }
  const checked = ((data: unknown) => {
    const values = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>
    for (const [name, property] of integers) {
      const value = values[name]
      if (typeof value === 'string' && !/^\d{1,9}$/.test(value)) {
        checked.errors = [
          {
            instancePath: `/${name}`,
            schemaPath: `#/properties/${name}/type`,
            keyword: 'type',
            params: { type: 'integer' },
            message: 'must be integer',
            schema: 'integer',
            parentSchema: property,
            data: value,
          },
        ]
        return false
      }
    }
    const valid = validate(data)
    checked.errors = validate.errors
    return valid
  }) as ValidateFunction
  return checked
}
