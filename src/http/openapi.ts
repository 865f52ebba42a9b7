// The OpenAPI 3.1 document, generated from the route schemas, and the reference page at /docs.
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { ERROR_CODES, statusOf, titleOf } from './errors.js'

export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Contacts API',
        version: '1.0.0',
        description:
          'Multi-tenant contacts API. Every request acts for the account of its bearer API key. ' +
          'Lists use opaque cursors: pass `next_cursor` back as `after`. Errors are RFC 9457 problem details.',
      },
      servers: [{ url: config.apiUrl }],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: `An API key: \`${config.keyPrefix}_live_\` followed by 32 letters and digits. Issue keys at ${config.appUrl}, Settings → API & Webhooks.`,
          },
        },
      },
    },
    // Only the public API and operations routes belong in the document.
    hideUntagged: false,
    transform: ({ schema, url }) => {
      const isApi = url.startsWith('/api/v1/') && url !== '/api/v1/openapi.json'
      const isOperations = url === '/healthz' || url === '/readyz'
      if (!isApi && !isOperations) {
        // The web application's pages are not part of the API.
        return { schema: { ...schema, hide: true }, url }
      }
      return { schema: { ...schema, ...(isApi ? { security: [{ apiKey: [] }], tags: ['api'] } : {}) }, url }
    },
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list' } })

  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  app.get('/docs/errors', { schema: { hide: true } }, async (_request, reply) => {
    const rows = ERROR_CODES.map(
      (code) =>
        `<tr id="${code}"><td><code>${code}</code></td><td>${statusOf(code)}</td><td>${titleOf(code)}</td></tr>`,
    ).join('')
    return reply
      .type('text/html; charset=utf-8')
      .send(
        `<!doctype html><html lang="en"><meta charset="utf-8"><title>Contacts API errors</title>` +
          `<h1>Error codes</h1><p>Every error is an RFC 9457 problem (application/problem+json) with a stable <code>code</code>.</p>` +
          `<table><tr><th>code</th><th>status</th><th>title</th></tr>${rows}</table></html>`,
      )
  })
}
