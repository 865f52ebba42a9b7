// Ajv set-up: bodies are validated strictly (no coercion, no silent stripping of unknown
// fields); query strings and path parameters are text, so numbers there are coerced.

import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

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
  return ajv
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const forBodies = makeAjv({ coerceTypes: false })
  const forText = makeAjv({ coerceTypes: true })
  return ({ schema, httpPart }) => (httpPart === 'body' ? forBodies : forText).compile(schema as object)
}
