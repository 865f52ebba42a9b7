// The options of `npm run bench` (bench/README.md#run), checked, with their defaults.
import path from 'node:path'
import type { Db, MeasureOptions } from './measure.js'
import { parseFlags, ROOT } from './processes.js'
import type { SeedPlan } from './seed.js'

export interface Options extends MeasureOptions {
  quick: boolean
  dbs: Db[]
  scenarios: string[] | undefined
  rounds: number
  seconds: number
  warmup: number
  connections: number
  plan: SeedPlan
  cpuProf: boolean
  keep: boolean
  pinPostgres: boolean
  pgAdminUrl: string
  engine: 'wrk' | 'autocannon'
  nodeFlags: string[]
  apiOnly: boolean
  /** The checkout whose build is measured (dist/main.js) and whose seed (bench/seed.ts) shapes its data. */
  root: string
}

export function parseOptions(argv: string[]): Options {
  const flags = parseFlags(argv, [
    'quick',
    'db',
    'scenario',
    'contacts',
    'rounds',
    'seconds',
    'warmup',
    'connections',
    'cpu-prof',
    'keep',
    'pg-free',
    'engine',
    'node-flags',
    'no-api-only',
    'root',
  ])
  const quick = flags.has('quick')
  const engine = flags.get('engine') ?? 'wrk'
  if (engine !== 'wrk' && engine !== 'autocannon') {
    throw new Error('--engine takes wrk or autocannon')
  }
  const number = (name: string, fallback: number) => {
    const raw = flags.get(name)
    const value = raw === undefined ? fallback : Number(raw)
    if (!Number.isFinite(value) || value <= 0 || value > 600) {
      throw new Error(`--${name} must be a number from 1 to 600`)
    }
    return value
  }
  const dbs = (flags.get('db') ?? 'sqlite,postgres').split(',') as Db[]
  if (dbs.some((db) => db !== 'sqlite' && db !== 'postgres')) {
    throw new Error('--db takes sqlite, postgres or both')
  }
  const plan: SeedPlan = quick
    ? { bigContacts: 20_000, deepPosition: 18_000, smallAccounts: 50, contactsPerSmallAccount: 20 }
    : { bigContacts: 1_000_000, deepPosition: 900_000, smallAccounts: 1000, contactsPerSmallAccount: 20 }
  const contacts = flags.get('contacts')
  if (contacts !== undefined) {
    const count = Number(contacts)
    if (!Number.isInteger(count) || count < 1000 || count > 10_000_000) {
      throw new Error('--contacts must be an integer from 1000 to 10000000')
    }
    plan.bigContacts = count
    plan.deepPosition = Math.floor(count * 0.9)
  }
  return {
    quick,
    dbs,
    scenarios: flags.get('scenario')?.split(','),
    rounds: number('rounds', quick ? 1 : 3),
    seconds: number('seconds', quick ? 2 : 10),
    warmup: number('warmup', quick ? 0.5 : 3),
    connections: number('connections', 50),
    plan,
    cpuProf: flags.has('cpu-prof'),
    keep: flags.has('keep'),
    pinPostgres: !flags.has('pg-free'),
    engine,
    nodeFlags: (flags.get('node-flags') ?? '').split(' ').filter((flag) => flag !== ''),
    apiOnly: !flags.has('no-api-only'),
    root: path.resolve(flags.get('root') ?? ROOT),
    pgAdminUrl:
      process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  }
}
