// The composition root: everything the app needs, built once from the config and passed down.
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { createKeyVerifier, type KeyVerifier } from './api-keys/key-verifier.js'
import type { Config } from './config.js'
import { type DatabaseHandle, openDatabase } from './db/database.js'
import { type Clock, systemClock } from './lib/clock.js'

export interface Deps {
  readonly config: Config
  readonly database: DatabaseHandle
  readonly clock: Clock
  readonly keyVerifier: KeyVerifier
  /** Signs cursors: config.secret, or the one kept in the SQLite data dir. */
  readonly secret: string
}

export function createDeps(config: Config, overrides: { database?: DatabaseHandle; clock?: Clock } = {}): Deps {
  const database = overrides.database ?? openDatabase(config.database)
  const clock = overrides.clock ?? systemClock
  return {
    config,
    database,
    clock,
    keyVerifier: createKeyVerifier(database.db, clock, config.keyPrefix),
    secret: config.secret ?? localSecret(config),
  }
}

export async function closeDeps(deps: Deps): Promise<void> {
  await deps.keyVerifier.close()
  await deps.database.close()
}

/**
 * SQLite needs no setup: the secret is generated on first start and kept beside the database
 * (mode 0600), so cursors stay valid across restarts and the CLI signs alike.
 */
function localSecret(config: Config): string {
  if (config.database.kind !== 'sqlite' || config.database.path === ':memory:') {
    return randomBytes(32).toString('hex')
  }
  const file = path.join(path.dirname(config.database.path), 'secret')
  try {
    writeFileSync(file, randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw error
    }
  }
  return readFileSync(file, 'utf8').trim()
}
