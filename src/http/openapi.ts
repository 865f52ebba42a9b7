// The OpenAPI 3.1 document, generated from the route schemas, and the reference page at /docs.
import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { openApiWebhooks } from '../webhooks/openapi-webhooks.js'
import { answerConditionally, bytesTag } from './conditional.js'
import { ERROR_CODES, statusOf, titleOf } from './errors.js'
import { completeOperations, componentize, type SchemaComponents } from './openapi-components.js'
import { HEADER_COMPONENT, operationsProblems } from './openapi-responses.js'
import { withCodeSamples } from './openapi-samples.js'

// The probes' routes (observability/health.ts) declare what they answer when all is well; their
// documentation adds what every route can answer, and says what each probe checks.
const PROBES: Record<
  string,
  { operationId: string; description: string; problems: ReturnType<typeof operationsProblems> }
> = {
  '/healthz': {
    operationId: 'getLiveness',
    description: 'Liveness: 200 while the process answers. Needs no key and checks nothing else.',
    problems: operationsProblems(),
  },
  '/readyz': {
    operationId: 'getReadiness',
    description:
      'Readiness: 200 when the database is reachable and its migrations are applied, else 503. Needs no key.',
    problems: operationsProblems('service_unavailable'),
  },
}

const sortedByName = <T>(record: Record<string, T>): Record<string, T> =>
  Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)))

/** `ui: false` (an API-only process): no Swagger UI at /docs, and its module is never loaded. */
export async function registerOpenApi(
  app: FastifyInstance,
  config: Config,
  options: { ui: boolean } = { ui: true },
): Promise<void> {
  const components: SchemaComponents = new Map()
  const server = {
    url: config.apiUrl,
    description: 'This deployment (API_URL): the production API, or a local one in development.',
    // Its audience (OWASP API9): every documented path is public, meant for clients outside.
    'x-internal': false,
  }
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Contacts API',
        version: '1.0.0',
        description:
          'Multi-tenant contacts API. Every request acts for the account of its bearer API key. ' +
          'Lists use opaque cursors: pass `next_cursor` back as `after`. Errors are RFC 9457 problem details ' +
          '(every code: [/docs/errors](/docs/errors)).\n\n' +
          'Guides, in the `docs/` folder of the repository: `quickstart.md`, `authentication.md`, `pagination.md`, ' +
          '`errors.md`, `idempotency.md`, `rate-limits.md`, `webhooks.md`, `versioning.md`; and `CHANGELOG.md`.',
        contact: { name: 'Contacts API', url: config.appUrl },
      },
      servers: [server],
      tags: [
        { name: 'api', description: 'The public API: every operation needs a bearer API key.' },
        { name: 'operations', description: 'Health probes for load balancers and orchestrators; no key.' },
        {
          name: 'webhooks',
          description: 'What this API sends to a webhook endpoint: one signed POST per event (Standard Webhooks).',
        },
      ],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: `An API key: \`${config.keyPrefix}_live_\` (or \`${config.keyPrefix}_test_\` for the account's test mode) followed by 32 letters and digits. Issue keys at ${config.appUrl}, Settings → API & Webhooks.`,
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    hideUntagged: false,
    transform: ({ schema: routeSchema, url }) => {
      const isApi = url.startsWith('/api/v1/') && url !== '/api/v1/openapi.json'
      const isOperations = url === '/healthz' || url === '/readyz'
      if (!isApi && !isOperations) {
        // The web application's pages are not part of the API.
        return { schema: { ...routeSchema, hide: true }, url }
      }
      const schema = {
        ...routeSchema,
        ...(routeSchema.body ? { body: componentize(routeSchema.body, components) } : {}),
        ...(routeSchema.response ? { response: componentize(routeSchema.response, components) } : {}),
      }
      if (isApi) {
        return { schema: { ...schema, security: [{ apiKey: [] }], tags: ['api'] }, url }
      }
      const probe = PROBES[url]
      if (!probe) {
        return { schema, url }
      }
      const { problems, ...operation } = probe
      // Public: `security: []` overrides nothing global today, but says so to a generated client.
      return {
        schema: { ...schema, ...operation, security: [], response: { ...(schema.response as object), ...problems } },
        url,
      }
    },
    // The webhooks a receiver gets, and the named schemas their bodies reference.
    transformObject: (document) => {
      if (!('openapiObject' in document)) {
        return document.swaggerObject
      }
      const { openapiObject } = document
      const { schemas, webhooks } = openApiWebhooks()
      for (const [name, schema] of Object.entries(schemas)) {
        components.set(name, componentize(schema, components, false))
      }
      const { headers, parameters } = completeOperations(
        openapiObject.paths as Parameters<typeof completeOperations>[0],
        components,
        HEADER_COMPONENT,
      )
      const existing = openapiObject.components ?? {}
      return {
        ...openapiObject,
        paths: withCodeSamples(openapiObject.paths ?? {}, config.apiUrl),
        components: {
          ...existing,
          schemas: sortedByName({ ...existing.schemas, ...Object.fromEntries(components) }),
          headers: sortedByName(headers),
          parameters,
        },
        webhooks,
      } as typeof openapiObject
    },
  })
  // /docs: the reference page, its assets and the error catalogue, with the web app's security headers.
  await app.register(async (docs) => {
    const headers = docsHeaders(config)
    docs.addHook('onSend', (request, reply, payload, done) => {
      reply.headers(isDocsAsset(request.url) ? headers.asset : headers.page)
      done(null, payload)
    })
    if (options.ui) {
      const { default: swaggerUi } = await import('@fastify/swagger-ui')
      await docs.register(swaggerUi, {
        routePrefix: '/docs',
        uiConfig: { docExpansion: 'list' },
        // No call to validator.swagger.io: the page talks to this server only.
        validatorUrl: false,
      })
    }
    docs.get('/docs/errors', { schema: { hide: true } }, async (_request, reply) => {
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
  })

  // Serialized once and sent as the same bytes with a strong ETag: it needs no key, so serializing it
  // per request was the cheapest way for anyone to make the server work and hold memory.
  let document: { bytes: Buffer; tag: string } | undefined
  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async (request, reply) => {
    if (document === undefined) {
      const bytes = Buffer.from(JSON.stringify(app.swagger()))
      document = { bytes, tag: bytesTag(bytes) }
    }
    return (
      answerConditionally(request, reply, document.tag) ??
      reply.type('application/json; charset=utf-8').send(document.bytes)
    )
  })
}

const SWAGGER_UI_STYLE_HASH = 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='

/** Swagger UI's own files; its initializer names the document, so it is revalidated like the page. */
const isDocsAsset = (url: string): boolean =>
  url.startsWith('/docs/static/') && !url.startsWith('/docs/static/swagger-initializer.js')

/**
 * The headers of everything under /docs: Swagger UI loads only its own files and calls only the
 * documented server; nothing may frame the page. Its files change only with the package: cached an hour.
 */
function docsHeaders(config: Config): { page: Record<string, string>; asset: Record<string, string> } {
  const page = {
    'content-security-policy': [
      "default-src 'self'",
      "base-uri 'self'",
      `connect-src 'self' ${new URL(config.apiUrl).origin}`,
      "font-src 'self' data:",
      "form-action 'self'",
      "frame-ancestors 'none'",
      "img-src 'self' data:",
      "object-src 'none'",
      "script-src 'self'",
      "script-src-attr 'none'",
      // The one <style> element Swagger UI's bundle inserts, allowed by its hash rather than 'unsafe-inline'
      // (checked in Chromium: with this policy the page renders and reports no violation).
      `style-src 'self' '${SWAGGER_UI_STYLE_HASH}'`,
    ].join('; '),
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cache-control': 'no-cache',
  }
  return { page, asset: { ...page, 'cache-control': 'public, max-age=3600' } }
}
