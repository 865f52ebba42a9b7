// pino options for Fastify's logger: one line per request, secrets never written.
import type { FastifyServerOptions } from 'fastify'
import type { Config } from '../config.js'

/** Replaces anything shaped like an API key, e.g. one pasted into a query string. */
export const redactKeys = (text: string): string => text.replace(/[a-z0-9]+_live_[A-Za-z0-9]+/g, '[REDACTED]')

export function loggerOptions(config: Config, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    ...(stream ? { stream } : {}),
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', 'secret', '*.secret'],
      censor: '[REDACTED]',
    },
    serializers: {
      req: (req: { method: string; url: string }) => ({ method: req.method, url: redactKeys(req.url) }),
    },
  }
}
