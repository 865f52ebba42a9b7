// Lints the OpenAPI document the app serves (GET /api/v1/openapi.json) with Spectral: spectral:oas
// plus the OWASP API Security Top 10 (2023) ruleset and the project's own rules, in .spectral.yaml.
// Fails on any finding of warning severity or above, so every rule either passes or is disabled in
// .spectral.yaml with its reason.  Usage: npm run lint:openapi  (OPENAPI_LINT_KEEP=1 keeps the file)
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { closeDeps, createDeps } from '../src/deps.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

async function servedDocument(): Promise<Record<string, unknown>> {
  // Built as deployed (an https API_URL becomes the document's `servers`); the document needs no data.
  const config = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'silent',
    API_URL: process.env.OPENAPI_LINT_API_URL ?? 'https://api.example.com',
  })
  const deps = createDeps(config)
  try {
    const app = await buildApp(deps, { logger: false })
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
    await app.close()
    if (res.statusCode !== 200) {
      throw new Error(`GET /api/v1/openapi.json answered ${res.statusCode}: ${res.body}`)
    }
    return res.json()
  } finally {
    await closeDeps(deps)
  }
}

const document = await servedDocument()

// Under node_modules/.cache (ignored by git and Biome), where .spectral.yaml's per-path overrides find it.
const cache = path.join(root, 'node_modules', '.cache')
mkdirSync(cache, { recursive: true })
const dir = mkdtempSync(path.join(cache, 'openapi-lint-'))
const file = path.join(dir, 'openapi.json')
writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`)
const result = spawnSync(
  path.join(root, 'node_modules', '.bin', 'spectral'),
  ['lint', file, '--ruleset', path.join(root, '.spectral.yaml'), '--fail-severity', 'warn'],
  { stdio: 'inherit' },
)
if (result.error) {
  console.error(`lint:openapi: could not run Spectral: ${result.error.message}`)
}
if (process.env.OPENAPI_LINT_KEEP || result.status !== 0) {
  console.log(`lint:openapi: the linted document is at ${file}`)
} else {
  rmSync(dir, { recursive: true, force: true })
}
process.exit(result.status ?? 1)
