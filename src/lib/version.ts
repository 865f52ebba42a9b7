// The service's version, package.json's: read once at start, from src/ (tsx) and from dist/ alike.
import { createRequire } from 'node:module'

export const SERVICE_VERSION: string = (createRequire(import.meta.url)('../../package.json') as { version: string })
  .version
