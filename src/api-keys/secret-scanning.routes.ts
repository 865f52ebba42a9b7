// POST /api/v1/secret_scanning/report: GitHub's secret-scanning partner endpoint (docs/key-safety.md).
// Registered only with SECRET_SCANNING_PUBLIC_KEYS; it takes no API key, only a valid signature.
import { Value } from '@sinclair/typebox/value'
import type { FastifyPluginAsync } from 'fastify'
import type { Deps } from '../deps.js'
import { AppError } from '../http/errors.js'
import { apiKeyPattern, hashApiKey } from './api-key.js'
import { findKeyByHash } from './api-keys.store.js'
import { reportExposedKey } from './key-lifecycle.js'
import {
  EXPOSED_URL_MAX,
  isSignedReport,
  REPORT_MAX_TOKENS,
  Report,
  type ScanningKeys,
  type TokenLabel,
} from './secret-scanning.js'

export const secretScanningRoutes: FastifyPluginAsync<{
  deps: Pick<Deps, 'database' | 'config' | 'clock' | 'keyRevocations'>
  scanning: { keys: ScanningKeys; action: 'revoke' | 'notify' }
}> = async (app, { deps, scanning }) => {
  const { db } = deps.database
  const prefix = deps.config.keyPrefix
  const keyPattern = apiKeyPattern(prefix)

  // The signature covers the bytes as sent: the body is kept as it came (the API's body limit holds).
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))

  app.post('/report', { schema: { hide: true } }, async (request) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0)
    const header = (name: string) => {
      const value = request.headers[name]
      return typeof value === 'string' ? value : undefined
    }
    if (
      !isSignedReport(
        scanning.keys,
        header('github-public-key-identifier'),
        header('github-public-key-signature'),
        body,
      )
    ) {
      throw new AppError('invalid_signature', 'The report is not signed by a key in SECRET_SCANNING_PUBLIC_KEYS.')
    }
    let report: unknown
    try {
      report = JSON.parse(body.toString('utf8'))
    } catch {
      throw new AppError('invalid_request', 'The request body is not valid JSON.')
    }
    if (!Value.Check(Report, report)) {
      throw new AppError(
        'invalid_request',
        `Expected a JSON array of at most ${REPORT_MAX_TOKENS} objects, each with a text token and type (url and source optional).`,
      )
    }
    const now = deps.clock.now()
    const labels: TokenLabel[] = []
    /** Each token once per report, however often it is named. */
    const known = new Map<string, boolean>()
    for (const { token, type, url, source } of report) {
      const keyHash = hashApiKey(token)
      let ours = known.get(keyHash)
      if (ours === undefined) {
        // A token of another shape is never looked up: it cannot be one of ours.
        const found = keyPattern.test(token) ? await findKeyByHash(db, keyHash, prefix) : undefined
        if (found) {
          const exposure = { url: (url ?? '').slice(0, EXPOSED_URL_MAX), source: (source ?? '').slice(0, 100) }
          await reportExposedKey(deps, { apiKey: found.key, keyHash }, exposure, scanning.action, now)
        }
        ours = found !== undefined
        known.set(keyHash, ours)
      }
      labels.push({ token_hash: keyHash, token_type: type, label: ours ? 'true_positive' : 'false_positive' })
    }
    return labels
  })
}
