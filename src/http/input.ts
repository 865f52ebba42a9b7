// Request input rules: JSON bodies only (anything else is 415), prototype poisoning refused, and no
// U+0000 anywhere (docs/design.md#identifiers-and-storage).
import type { FastifyInstance } from 'fastify'
import { AppError } from './errors.js'

export const BODY_LIMIT = 1024 * 1024

export function installInputRules(app: FastifyInstance): void {
  // Not async: it runs on every request.
  app.addHook('onRequest', (request, _reply, done) => {
    // Query strings and paths: %00 decodes to U+0000.
    if (/%00/i.test(request.url)) {
      done(new AppError('invalid_parameter', 'The URL must not contain the character U+0000 (%00).'))
      return
    }
    // The query parser would keep a bad escape (`%zz`, a cut or surrogate UTF-8 sequence) as literal
    // text; a badly encoded path is already a 400, so is a badly encoded query.
    const query = request.url.indexOf('?')
    if (query !== -1 && !isPercentEncodedUtf8(request.url.slice(query + 1))) {
      done(new AppError('invalid_request', 'The query string is not valid percent-encoded UTF-8.'))
      return
    }
    done()
  })

  // No parser decodes a compressed body, which would be read as a broken one: 415 with
  // Accept-Encoding, as RFC 9110 says, before any parser so every route refuses it alike.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const encoding = request.headers['content-encoding']
    if (encoding !== undefined && !/^\s*identity\s*$/i.test(encoding)) {
      done(
        new AppError('unsupported_media_type', 'Send the request body uncompressed: no Content-Encoding is accepted.', {
          headers: { 'accept-encoding': 'identity' },
        }),
      )
      return
    }
    done(null, payload)
  })

  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (request, raw, done) => {
    // JSON is UTF-8 (RFC 8259 §8.1): another charset is refused rather than read as if it were one.
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(request.headers['content-type'] ?? '')?.[1]
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
      return done(new AppError('unsupported_media_type', 'Send the JSON body as UTF-8 (charset=utf-8, or no charset).'))
    }
    // Decoded strictly: a byte that is not UTF-8 would otherwise be stored as U+FFFD, silently.
    let body: string
    try {
      body = UTF8.decode(raw as Buffer)
    } catch {
      return done(new AppError('invalid_request', 'The request body is not valid UTF-8.'))
    }
    // Clients often send Content-Type: application/json on every request, DELETE included.
    if (body === '' && request.routeOptions.schema?.body === undefined) {
      return done(null, undefined)
    }
    parseJson(request, body, (error, value) => {
      if (error) {
        return done(isValidJson(body) ? prototypeKeyRefused() : error, undefined)
      }
      if (hasUnstorableValue(value)) {
        return done(
          new AppError('invalid_parameter', 'Text must be valid Unicode without U+0000, and numbers must be finite.'),
          undefined,
        )
      }
      done(null, value)
    })
  })
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

// The parser (secure-json-parse) refuses JSON that is valid but has a key that could poison
// prototypes, under the same error as broken JSON: told apart here, so the message is true.
const prototypeKeyRefused = () =>
  new AppError('invalid_request', 'The request body has a "__proto__" or "constructor" key, which is refused.')
function isValidJson(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

function isPercentEncodedUtf8(text: string): boolean {
  if (!text.includes('%')) {
    return true
  }
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/**
 * U+0000, a lone UTF-16 surrogate (PostgreSQL would store U+FFFD: two strings would collide), or a
 * number JSON cannot carry back (1e400). Iterative, so a deeply nested body cannot overflow the stack.
 */
function hasUnstorableValue(root: unknown): boolean {
  const bad = (text: string) => text.includes('\u0000') || !text.isWellFormed()
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value === 'string') {
      if (bad(value)) {
        return true
      }
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) {
        return true
      }
    } else if (Array.isArray(value)) {
      for (const item of value) {
        stack.push(item)
      }
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (bad(key)) {
          return true
        }
        stack.push(inner)
      }
    }
  }
  return false
}
