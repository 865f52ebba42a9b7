// pino options for Fastify's logger: one line per request, secrets never written.
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify'
import type { Config } from '../config.js'
import { traceFields, tracingOn } from './tracing.js'

const API_KEY = /[a-z0-9]+_(?:live|test)_[A-Za-z0-9]+/g

/** Replaces anything shaped like an API key of either mode, e.g. one pasted into a query string. */
export const redactKeys = (text: string): string =>
  // The cheap test first: the pattern backtracks over every run of letters (a cursor is one long run).
  text.includes('_live_') || text.includes('_test_') ? text.replace(API_KEY, '[REDACTED]') : text

/** Query parameters whose values are a person's data (a contact's email, a search), not the request's shape. */
const PERSONAL_QUERY = /([?&](?:email|q)=)[^&#]*/g

/**
 * A request's URL as logged: no API key, no invitation link's token (web/people.routes.ts), and no
 * email address or search text from the query (docs/api-decisions.md, "What the logs keep").
 */
export const redactUrl = (url: string): string => {
  const redacted = redactKeys(url).replace(/^\/invitations\/[^/?]+/, '/invitations/[REDACTED]')
  return redacted.includes('?') ? redacted.replace(PERSONAL_QUERY, '$1[REDACTED]') : redacted
}

export function loggerOptions(config: Config, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    stream: stream ?? batchedStdout(),
    level: config.logLevel,
    // The trace of each line when tracing is on (tracing.ts); no call per line otherwise.
    ...(tracingOn() ? { mixin: traceFields } : {}),
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', 'secret', '*.secret'],
      censor: '[REDACTED]',
    },
    serializers: {
      req: (req: { method: string; url: string }) => ({
        method: req.method,
        // An invitation link's token is a credential too (web/people.routes.ts).
        url: redactUrl(req.url),
      }),
    },
  }
}

/**
 * The logger of the one line per request: the app's logger without its redaction pass, the line's
 * main cost (docs/performance.md, round 3). Safe because the line's fields are fixed and carry no
 * secret (the URL goes through redactUrl); anything else goes through the app's logger, redacted.
 */
export const requestLineLogger = (log: FastifyBaseLogger): FastifyBaseLogger => log.child({}, { redact: { paths: [] } })

interface LineSink {
  write(line: string): boolean
}

let stdoutSink: LineSink | undefined

/**
 * Standard output for the log, shared by every app in the process: the lines of one turn of the event
 * loop go out in one write at its end, not one each through the thread pool. What is pending at exit
 * (a crash too) is written synchronously; only a kill -9 can lose the turn in progress.
 */
function batchedStdout(): LineSink {
  if (stdoutSink) {
    return stdoutSink
  }
  let pending = ''
  let broken = false
  const flush = () => {
    if (pending !== '' && !broken) {
      process.stdout.write(pending)
    }
    pending = ''
  }
  // EPIPE and the like: the reader is gone; stop logging rather than crash (as pino does).
  process.stdout.on('error', () => {
    broken = true
  })
  process.on('exit', flush)
  stdoutSink = {
    write(line) {
      if (pending === '') {
        setImmediate(flush)
      }
      pending += line
      return true
    },
  }
  return stdoutSink
}
