// Creates src/db/migrations/<UTC yyyymmddThhmmss>-<slug>.ts from a template and appends it to the
// migrations index.  Usage: npm run migration:new NAME  (NAME: lower-case words joined by - or _)
// Exit 2 for a missing or bad NAME, or one already used; 1 when the clock is behind the last migration.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const NAME = /^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$/
/** Keeps file names short enough to read in a listing. */
const MAX_NAME = 60

export class MigrationNameError extends Error {}

/** The migration's file stem and export name, e.g. `20261124T093000-add-notes` and `m20261124T093000_add_notes`. */
export function migrationNames(name: string, now: Date): { stem: string; exportName: string } {
  if (!NAME.test(name) || name.length > MAX_NAME) {
    throw new MigrationNameError(
      `bad migration name ${JSON.stringify(name)}: lower-case letters and digits, words joined by - or _, at most ${MAX_NAME} characters (e.g. add-contact-notes)`,
    )
  }
  const stamp = now.toISOString().slice(0, 19).replaceAll('-', '').replaceAll(':', '')
  return { stem: `${stamp}-${name.replaceAll('_', '-')}`, exportName: `m${stamp}_${name.replaceAll('-', '_')}` }
}

const template = (stem: string) => `// TODO: what this migration changes and why (${stem}).
// Frozen: never edit a migration that has shipped; add a new one.
import type { Dialect } from '../dialect.js'
import type { MigrationDb } from '../migration-helpers.js'

export async function up(_db: MigrationDb, _dialect: Dialect): Promise<void> {
  throw new Error('migration ${stem} is not written yet')
}

export async function down(_db: MigrationDb): Promise<void> {
  throw new Error('migration ${stem} is not written yet')
}
`

/** Writes the migration into `dir` and appends it to `dir/index.ts`; returns the new file's path. */
export function createMigration(dir: string, name: string, now = new Date()): string {
  const { stem, exportName } = migrationNames(name, now)
  const slug = stem.slice(stem.indexOf('-'))
  const existing = readdirSync(dir).filter((file) => /^\d{8}T\d{6}-/.test(file))
  if (existing.some((file) => file.endsWith(`${slug}.ts`))) {
    throw new MigrationNameError(`a migration named ${slug.slice(1)} exists already`)
  }
  // The Migrator runs migrations in name order and refuses one that sorts before those already run.
  const last = existing.sort().at(-1)
  if (last !== undefined && `${stem}.ts` <= last) {
    throw new Error(`${stem} would sort before ${last}: is the clock right?`)
  }
  const file = path.join(dir, `${stem}.ts`)
  if (existsSync(file)) {
    throw new MigrationNameError(`${file} exists already`)
  }
  const index = path.join(dir, 'index.ts')
  const listed = readFileSync(index, 'utf8')
  writeFileSync(file, template(stem))
  writeFileSync(
    index,
    `${listed.endsWith('\n') ? listed : `${listed}\n`}export * as ${exportName} from './${stem}.js'\n`,
  )
  return file
}

function main(args: string[]): number {
  const [name, ...rest] = args
  if (name === undefined || rest.length > 0) {
    process.stderr.write('usage: npm run migration:new NAME  (e.g. add-contact-notes)\n')
    return 2
  }
  const dir = fileURLToPath(new URL('../src/db/migrations/', import.meta.url))
  try {
    process.stdout.write(`created ${path.relative(process.cwd(), createMigration(dir, name))}\n`)
    return 0
  } catch (error) {
    process.stderr.write(`migration:new: ${(error as Error).message}\n`)
    return error instanceof MigrationNameError ? 2 : 1
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  process.exitCode = main(process.argv.slice(2))
}
