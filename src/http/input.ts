// Request input rules: JSON bodies only (anything else is 415), prototype poisoning refused,
// and no U+0000 anywhere (PostgreSQL cannot store it; DESIGN §4).
import type { FastifyInstance } from 'fastify'
import { AppError } from './errors.js'

export const BODY_LIMIT = 1024 * 1024

export function installInputRules(app: FastifyInstance): void {
  // Query strings and paths: %00 decodes to U+0000.
  app.addHook('onRequest', async (request) => {
    if (/%00/i.test(request.url)) {
      throw new AppError('invalid_parameter', 'The URL must not contain the character U+0000 (%00).')
    }
  })

  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (request, body, done) => {
    parseJson(request, body as string, (error, value) => {
      if (error) {
        return done(error, undefined)
      }
      if (containsNul(value)) {
        return done(new AppError('invalid_parameter', 'Text must not contain the character U+0000.'), undefined)
      }
      done(null, value)
    })
  })
}

/** Iterative, so a body nested 500,000 levels deep cannot overflow the stack. */
function containsNul(root: unknown): boolean {
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value === 'string') {
      if (value.includes('\u0000')) {
        return true
      }
    } else if (Array.isArray(value)) {
      for (const item of value) {
        stack.push(item)
      }
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (key.includes('\u0000')) {
          return true
        }
        stack.push(inner)
      }
    }
  }
  return false
}
