// The bench's report: the targets met or missed, and the tables of ours against raw node:http.
import type { Db, Measured, ScenarioResult } from './measure.js'
import type { WebhookResult } from './webhooks.js'

export interface Target {
  name: string
  met: boolean | undefined
  detail: string
}

const dbName = (db: Db) => (db === 'sqlite' ? 'SQLite' : 'PostgreSQL')
export const pct = (ratio: number) => `${(ratio * 100).toFixed(1)} %`
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`

/** What held a raw run back: the load generator at its limit (or unmeasured), or other work on the machine. */
const limitOf = (raw: Measured): string =>
  !Number.isFinite(raw.generatorBusy) || raw.generatorBusy >= 0.9
    ? 'the load generator was the limit'
    : 'other work on the machine was the limit'

function whyInvalid(raw: Measured): string {
  const generator = Number.isFinite(raw.generatorBusy) ? `, ${raw.engine} at ${pct(raw.generatorBusy)}` : ''
  return `raw at ${pct(raw.busy)} of its core${generator}: ${limitOf(raw)}`
}

/** The invalid raw runs in one line per cause, with the ranges of both busy figures. */
export function invalidSummary(raws: Measured[]): string {
  const range = (values: number[]) => {
    const finite = values.filter(Number.isFinite)
    return finite.length === 0 ? 'n/a' : `${pct(Math.min(...finite))}–${pct(Math.max(...finite))}`
  }
  return [...new Set(raws.map(limitOf))]
    .map((cause) => {
      const mine = raws.filter((raw) => limitOf(raw) === cause)
      return `${mine.length}: ${cause} (raw ${range(mine.map((r) => r.busy))} of its core, load generator ${range(mine.map((r) => r.generatorBusy))})`
    })
    .join('; ')
}

export function evaluate(results: ScenarioResult[]): Target[] {
  const find = (db: Db, scenario: string) =>
    results.find((r) => r.db === db && r.mode === 'serve' && r.scenario === scenario)
  const targets: Target[] = []
  // Against raw serving the scenario's own bytes, by CPU per request (req/s beside it); a raw run
  // that did not saturate its core decides nothing.
  const ratio = (name: string, db: Db, scenario: string, min: number) => {
    const r = find(db, scenario)
    const label = `${name}, ${dbName(db)} ≥ ${min * 100} % of raw`
    if (r?.cpuRatio === undefined || r.raw === undefined || r.rpsRatio === undefined) {
      targets.push({ name: label, met: undefined, detail: 'not measured' })
      return
    }
    const detail = `CPU ${pct(r.cpuRatio)}, req/s ${pct(r.rpsRatio)}`
    targets.push(
      r.raw.valid
        ? { name: label, met: r.cpuRatio >= min, detail }
        : { name: label, met: undefined, detail: `INVALID: ${whyInvalid(r.raw)} (${detail})` },
    )
  }
  // Against the least code doing the same database work (bench/minimal-server.mjs), by req/s: the anchor.
  const ofMinimal = (name: string, db: Db, scenario: string, min: number) => {
    const r = find(db, scenario)
    targets.push({
      name: `${name}, ${dbName(db)} ≥ ${min * 100} % of the minimal server`,
      met: r?.minimalRatio === undefined ? undefined : r.minimalRatio >= min,
      detail: r?.minimalRatio === undefined ? 'not measured' : `req/s ${pct(r.minimalRatio)}`,
    })
  }
  for (const db of ['sqlite', 'postgres'] as const) {
    ofMinimal('GET /me', db, 'me', 0.9)
    ofMinimal('list page 1', db, 'list', 0.8)
    ofMinimal('list page at 90 % depth', db, 'list-deep', 0.8)
    ofMinimal('POST /contacts', db, 'create', db === 'sqlite' ? 0.5 : 0.6)
    ofMinimal('PATCH /contacts/{id}', db, 'patch', db === 'sqlite' ? 0.5 : 0.6)
  }
  ratio('GET /me', 'sqlite', 'me', 0.6)
  ratio('GET /me', 'postgres', 'me', 0.6)
  ratio('list page of 50', 'sqlite', 'list', 0.3)
  ratio('list page of 50', 'postgres', 'list', 0.2)
  for (const db of ['sqlite', 'postgres'] as const) {
    const first = find(db, 'list')
    const deep = find(db, 'list-deep')
    // By CPU per request, the figure other work on the machine disturbs least; p50 beside it.
    targets.push({
      name: `list page at 90 % depth ≤ 1.2 × page 1 (CPU per request), ${dbName(db)}`,
      met: first && deep ? deep.cpuUsPerRequest <= 1.2 * first.cpuUsPerRequest : undefined,
      detail:
        first && deep
          ? `${deep.cpuUsPerRequest.toFixed(0)} µs vs ${first.cpuUsPerRequest.toFixed(0)} µs (×${(deep.cpuUsPerRequest / first.cpuUsPerRequest).toFixed(2)}); p50 ×${(deep.p50 / first.p50).toFixed(2)}`
          : 'not measured',
    })
  }
  ratio('POST /contacts', 'sqlite', 'create', 0.2)
  // The 304 of a polling client does /me's work plus a version read: at least 90 % of /me's req/s.
  for (const db of ['sqlite', 'postgres'] as const) {
    const me = find(db, 'me')
    const polled = find(db, 'list-304')
    targets.push({
      name: `polling client's 304, ${dbName(db)} ≥ 90 % of GET /me`,
      met: me && polled ? polled.rps >= 0.9 * me.rps : undefined,
      detail: me && polled ? `req/s ${pct(polled.rps / me.rps)}` : 'not measured',
    })
  }
  ratio('polling client, list page 304', 'sqlite', 'list-304', 0.5)
  ratio('polling client, list page 304', 'postgres', 'list-304', 0.5)
  for (const [mode, limit] of [
    ['serve', 150],
    ['api-only', 110],
  ] as const) {
    const rows = results.filter((r) => r.mode === mode)
    const peak = Math.max(0, ...rows.map((r) => r.rss))
    const worst = rows.find((r) => r.rss === peak)
    targets.push({
      name: `RSS under load ≤ ${limit} MiB, ${mode === 'serve' ? '`serve`' : '`serve --api-only`, WEBHOOK_WORKER=off'}`,
      met: peak > 0 ? peak <= limit * 2 ** 20 : undefined,
      detail: worst ? `peak ${mib(peak)} (${dbName(worst.db)}, ${worst.scenario})` : 'not measured',
    })
  }
  return targets
}

/** The headline table: every scenario against raw node:http serving its own answer. */
export function table(results: ScenarioResult[]): string {
  const rows = [
    [
      'database',
      'scenario',
      'answer',
      'vs minimal, req/s',
      'minimal req/s',
      'vs raw, CPU',
      'vs raw, req/s',
      'CPU µs/req',
      'raw CPU µs/req',
      'req/s',
      'raw req/s',
      'p50 ms',
      'p99 ms',
      'raw p50 ms',
      'RSS MiB',
      'raw core busy',
      'wrk busy (raw run)',
    ],
    ...results
      .filter((r) => r.mode === 'serve')
      .map((r) => {
        const raw = r.raw
        const invalid = raw !== undefined && !raw.valid
        const ratio = (value: number | undefined) =>
          value === undefined ? '' : invalid ? `INVALID (${pct(value)})` : pct(value)
        return [
          dbName(r.db),
          r.title,
          `${r.status}, ${(r.bytes / 1024).toFixed(1)} KB`,
          r.minimalRatio === undefined ? '' : pct(r.minimalRatio),
          r.minimal ? Math.round(r.minimal.rps).toLocaleString('en-US') : '',
          ratio(r.cpuRatio),
          ratio(r.rpsRatio),
          r.db === 'postgres'
            ? `${r.cpuUsPerRequest.toFixed(0)} (${r.dbCpuUsPerRequest.toFixed(0)} db)`
            : r.cpuUsPerRequest.toFixed(0),
          raw ? raw.cpuUsPerRequest.toFixed(1) : '',
          Math.round(r.rps).toLocaleString('en-US'),
          raw ? Math.round(raw.rps).toLocaleString('en-US') : '',
          r.p50.toFixed(2),
          r.p99.toFixed(2),
          raw ? raw.p50.toFixed(2) : '',
          (r.rss / 2 ** 20).toFixed(0),
          raw ? `${pct(raw.busy)}${invalid ? ' INVALID' : ''}` : '',
          raw && Number.isFinite(raw.generatorBusy) ? pct(raw.generatorBusy) : '',
        ]
      }),
  ]
  return markdown(rows, 2)
}

/** Peak RSS of both kinds of process, per database, over all the scenarios measured. */
export function rssTable(results: ScenarioResult[]): string {
  const rows = [['database', 'process', 'peak RSS MiB', 'under', 'CPU µs/req, list page 1']]
  for (const db of ['sqlite', 'postgres'] as const) {
    for (const mode of ['serve', 'api-only'] as const) {
      const mine = results.filter((r) => r.db === db && r.mode === mode)
      if (mine.length === 0) {
        continue
      }
      const peak = Math.max(...mine.map((r) => r.rss))
      rows.push([
        dbName(db),
        mode === 'serve' ? 'serve' : 'serve --api-only, WEBHOOK_WORKER=off',
        (peak / 2 ** 20).toFixed(0),
        mine.find((r) => r.rss === peak)?.scenario ?? '',
        mine.find((r) => r.scenario === 'list')?.cpuUsPerRequest.toFixed(0) ?? '',
      ])
    }
  }
  return markdown(rows, 2)
}

function markdown(rows: string[][], firstNumeric: number): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length))) ?? []
  const line = (row: string[]) =>
    `| ${row.map((cell, i) => (i >= firstNumeric ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(' | ')} |`
  return [
    line(rows[0] ?? []),
    `|${widths.map((w, i) => (i >= firstNumeric ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n')
}

export function evaluateWebhooks(runs: WebhookResult[]): Target[] {
  const targets: Target[] = []
  for (const run of runs) {
    const name = run.db === 'sqlite' ? 'SQLite' : 'PostgreSQL'
    targets.push({
      name: `webhook lag at ${run.lag.rate} writes/s × ${run.lag.endpoints} endpoints p50 ≤ 100 ms, p99 ≤ 1 s, ${name}`,
      met: run.lag.p50 <= 100 && run.lag.p99 <= 1000,
      detail: `p50 ${run.lag.p50} ms, p99 ${run.lag.p99} ms, max ${run.lag.max} ms`,
    })
    targets.push({
      name: `webhook deliveries ≥ 2,000/s on one core, ${name}`,
      met: run.throughput.perSecond >= 2000,
      detail: `${Math.round(run.throughput.perSecond).toLocaleString('en-US')}/s (${run.throughput.deliveries.toLocaleString('en-US')} to ${run.throughput.endpoints} endpoints; ${run.throughput.cpuUsPerDelivery.toFixed(0)} µs CPU each)`,
    })
    // The runs without endpoints, before and after, are the reference: when they differ by more than
    // the margin the machine moved more than what is measured, and the check cannot say.
    const [before, after] = run.writes.none.map((r) => r.rps)
    const drift = before && after ? Math.abs(before - after) / Math.max(before, after) : 0
    const detail = `${(run.writes.ratio * 100).toFixed(1)} % (${run.writes.none.map((r) => Math.round(r.rps)).join(' / ')} req/s without, ${Math.round(run.writes.with.rps)} with)`
    targets.push({
      name: `POST /contacts with ${run.writes.endpoints} endpoints within 10 % of none, ${name}`,
      met: drift > 0.1 ? undefined : run.writes.ratio >= 0.9,
      detail: drift > 0.1 ? `INVALID: the runs without endpoints differ by ${pct(drift)} (${detail})` : detail,
    })
  }
  return targets
}

export function webhookTable(runs: WebhookResult[]): string {
  const lines = [
    '| database | deliveries/s (backlog) | CPU µs/delivery | lag p50 ms | lag p99 ms | lag max ms | POST req/s: none / 10 endpoints / none |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ]
  for (const run of runs) {
    lines.push(
      `| ${run.db === 'sqlite' ? 'SQLite' : 'PostgreSQL'} | ${Math.round(run.throughput.perSecond).toLocaleString('en-US')} | ${run.throughput.cpuUsPerDelivery.toFixed(0)}${run.db === 'postgres' ? ` (${run.throughput.dbCpuUsPerDelivery.toFixed(0)} db)` : ''} | ${run.lag.p50} | ${run.lag.p99} | ${run.lag.max} | ${Math.round(run.writes.none[0]?.rps ?? 0)} / ${Math.round(run.writes.with.rps)} / ${Math.round(run.writes.none[1]?.rps ?? 0)} (${(run.writes.ratio * 100).toFixed(1)} %) |`,
    )
  }
  return lines.join('\n')
}
