// `npm run bench` and `npm run bench:quick`: seed, serve, load, compare every scenario with raw
// node:http answering alike (method and options: bench/README.md#run).
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { ExplainedFilter } from './explain.js'
import { hasWrk } from './load.js'
import { type Db, LOAD_CORE, load, measure, RAW_MIN_BUSY, type ScenarioResult, SERVER_CORE } from './measure.js'
import { canPin, cpuMsOf, freePort, log, RESULTS, ROOT, spawnNode, stopProcess, waitForHttp } from './processes.js'
import { evaluate, evaluateWebhooks, invalidSummary, pct, rssTable, table, webhookTable } from './report.js'
import { runDb } from './run-db.js'
import { type Options, parseOptions } from './run-options.js'
import { SCENARIOS, type Scenario } from './scenarios.js'
import { type BenchKit, runWebhooks, WEBHOOK_PLANS, type WebhookResult } from './webhooks.js'

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2))
  if (!existsSync(path.join(options.root, 'dist', 'main.js'))) {
    throw new Error(
      `${path.join(options.root, 'dist', 'main.js')} is missing: run \`npm run build\` there first (npm run bench does)`,
    )
  }
  if (options.root !== ROOT) {
    log(`measuring the build in ${options.root} (its dist/main.js, data from its bench/seed.ts)`)
  }
  const taskset = canPin()
  const loadBefore = os.loadavg()
  const machine = {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.type()} ${os.release()}`,
    taskset,
    engine: options.engine === 'wrk' && hasWrk() ? 'wrk' : 'autocannon',
    loadAverageBefore: loadBefore,
  }
  log(
    `machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGiB} GiB, node ${machine.node}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  )
  if (machine.engine !== options.engine) {
    log(
      'warning: wrk is not installed (apt-get install wrk): autocannon cannot saturate raw node:http, expect INVALID rows',
    )
  }
  log(
    taskset
      ? `pinning: server on core ${SERVER_CORE}${options.pinPostgres ? ' (with its PostgreSQL backends)' : ''}, load generator on core ${LOAD_CORE}`
      : 'taskset not available (or one core): processes are not pinned',
  )
  if (!options.quick && (loadBefore[0] ?? 0) > 1) {
    log('warning: the 1-minute load average is above 1.0; other work on this machine will lower the numbers')
  }
  log(
    `plan: ${options.plan.bigContacts.toLocaleString('en-US')} contacts in one account + ${options.plan.smallAccounts} accounts × ${options.plan.contactsPerSmallAccount}; ${options.connections} connections, warm-up ${options.warmup} s, ${options.rounds} × ${options.seconds} s per scenario`,
  )

  const cleanups: Array<() => Promise<void>> = []
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    log('interrupted: cleaning up')
    void runCleanups(cleanups).finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)

  const started = Date.now()
  const results: ScenarioResult[] = []
  const webhooks: WebhookResult[] = []
  const seedSeconds: Partial<Record<Db, number>> = {}
  const explain: Partial<Record<Db, ExplainedFilter[]>> = {}
  const contactScenarios = !options.scenarios || options.scenarios.some((name) => name !== 'webhooks')
  const webhookScenario = !options.scenarios || options.scenarios.includes('webhooks')
  try {
    if (contactScenarios) {
      for (const db of options.dbs) {
        const run = await runDb(db, options, taskset, cleanups)
        results.push(...run.results)
        seedSeconds[db] = run.seedSeconds
        explain[db] = run.explained
      }
    }
    if (webhookScenario) {
      const kit = benchKit(options, taskset)
      for (const db of options.dbs) {
        webhooks.push(await runWebhooks(db, WEBHOOK_PLANS[options.quick ? 'quick' : 'full'], kit, cleanups))
        await runCleanups(cleanups)
      }
    }
  } finally {
    if (!interrupted) {
      await runCleanups(cleanups)
    }
  }

  const targets = [...(contactScenarios ? evaluate(results) : []), ...evaluateWebhooks(webhooks)]
  const loadAfter = os.loadavg()
  const report = {
    startedAt: new Date(started).toISOString(),
    minutes: (Date.now() - started) / 60_000,
    machine: { ...machine, loadAverageAfter: loadAfter },
    options: { ...options, pgAdminUrl: undefined },
    seedSeconds,
    // Which ratios stand: a raw run below RAW_MIN_BUSY of its core was limited by the load generator.
    validity: {
      rawMinBusy: RAW_MIN_BUSY,
      invalid: results.filter((r) => r.raw && !r.raw.valid).map((r) => `${r.db} ${r.scenario}`),
    },
    results,
    webhooks,
    targets,
    explain,
  }
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(
    RESULTS,
    `bench-${options.quick ? 'quick-' : ''}${report.startedAt.replace(/[:.]/g, '-')}.json`,
  )
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)

  if (results.length > 0) {
    console.log(`\n${table(results)}\n`)
    console.log(`${rssTable(results)}\n`)
  }
  if (webhooks.length > 0) {
    console.log(`\n${webhookTable(webhooks)}\n`)
  }
  if (results.length > 0) {
    const raws = results.flatMap((r) => (r.raw ? [r.raw] : []))
    const invalid = raws.filter((raw) => !raw.valid).length
    console.log(
      `vs raw, CPU: raw node:http's CPU time per request, serving the scenario's own answer, over ours (the service's: server plus PostgreSQL backends): our share of raw's capacity per core. vs raw, req/s: ours over raw's, same load. Raw counts only when its server kept ≥ ${RAW_MIN_BUSY * 100} % of its core busy (else the load generator, or other work on the machine, was the limit); ${
        invalid === 0
          ? `every raw run did (${raws.map((raw) => pct(raw.busy)).join(', ')})`
          : `${invalid} of ${raws.length} did not, and those rows are INVALID: ${invalidSummary(raws.filter((raw) => !raw.valid))}`
      }. Load generator: ${machine.engine}.\n`,
    )
  }
  for (const target of targets) {
    console.log(`${target.met === undefined ? '  ·' : target.met ? ' ok' : 'MISS'}  ${target.name}: ${target.detail}`)
  }
  console.log(
    `\n${options.quick ? 'quick run (numbers are indicative only)' : 'full run'}; load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(2)).join(' ')}; ${report.minutes.toFixed(1)} min`,
  )
  console.log(`results: ${path.relative(ROOT, file)}`)
  return 0
}

/** The webhook benches' helpers: the same process handling, pinning and load generator as the rest. */
function benchKit(options: Options, taskset: boolean): BenchKit {
  return {
    taskset,
    serverCore: SERVER_CORE,
    loadCore: LOAD_CORE,
    results: RESULTS,
    pgAdminUrl: options.pgAdminUrl,
    pinPostgres: options.pinPostgres,
    cpuProf: options.cpuProf,
    log,
    freePort,
    spawnNode: (args, core, pin, env) => spawnNode(args, core, pin, env),
    waitForHttp,
    stopProcess,
    cpuMsOf,
    load,
    measureCreate: async (db, url, pid, backends, headers) => {
      const create = SCENARIOS.find((s) => s.name === 'create') as Scenario
      const request = {
        method: create.method,
        status: create.status,
        path: create.path as string,
        body: create.body as string,
        headers,
      }
      return measure(
        options,
        taskset,
        { url, pid, ...(backends ? { beforeEach: backends } : {}) },
        request,
        `${db} create`,
      )
    },
  }
}

async function runCleanups(cleanups: Array<() => Promise<void>>): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`))
  }
  cleanups.length = 0
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    log(`bench failed: ${error instanceof Error ? error.message : String(error)}`)
    process.exitCode = 1
  },
)
