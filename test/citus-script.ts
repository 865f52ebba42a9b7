// The Citus distribution script as docs/scale-out.md prints it, read back and judged against the
// plan (test/citus-plan.ts) and a catalog. The doc holds the script between
// `<!-- citus-script:begin -->` and `<!-- citus-script:end -->`, its table of placements between
// `<!-- citus-placements:begin/end -->` and its list of unique indexes that do not lead with
// account_id between `<!-- citus-unique:begin/end -->`; test/citus-script.test.ts runs the checks.
import { readFileSync } from 'node:fs'
import { type Catalog, NON_TENANT_TABLES, type Placement, placementOf } from './citus-plan.js'

export const SCALE_OUT_DOC = new URL('../docs/scale-out.md', import.meta.url)

/** The text between `<!-- name:begin -->` and `<!-- name:end -->`; throws if the markers are not there once each. */
export function between(text: string, name: string): string {
  const begin = `<!-- ${name}:begin -->`
  const end = `<!-- ${name}:end -->`
  const from = text.indexOf(begin)
  const to = text.indexOf(end)
  if (from < 0 || to < from || text.indexOf(begin, from + 1) >= 0 || text.indexOf(end, to + 1) >= 0) {
    throw new Error(`docs/scale-out.md: expected one ${begin} … ${end}`)
  }
  return text.slice(from + begin.length, to)
}

export function readScaleOutDoc(): string {
  return readFileSync(SCALE_OUT_DOC, 'utf8')
}

export type ScriptCall =
  | { fn: 'create_reference_table'; table: string }
  | { fn: 'create_distributed_table'; table: string; column: string; colocateWith?: string }

export interface Script {
  /** Statements that change the schema (run for real by the test), in order. */
  ddl: string[]
  /** The Citus calls, in order. */
  calls: ScriptCall[]
  /** Anything the parser did not understand. */
  unknown: string[]
}

/** Splits the script (a ```sql block, `--` comments allowed) into schema changes and Citus calls. */
export function parseScript(block: string): Script {
  const body = block
    .replace(/```sql|```/g, '')
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n')
  const script: Script = { ddl: [], calls: [], unknown: [] }
  for (const raw of body.split(';')) {
    const statement = raw.trim().replace(/\s+/g, ' ')
    if (statement === '') {
      continue
    }
    const reference = /^select create_reference_table\('(\w+)'\)$/i.exec(statement)
    const distributed = /^select create_distributed_table\('(\w+)', '(\w+)'(?:, colocate_with => '(\w+)')?\)$/i.exec(
      statement,
    )
    if (reference?.[1]) {
      script.calls.push({ fn: 'create_reference_table', table: reference[1] })
    } else if (distributed?.[1] && distributed[2]) {
      script.calls.push({
        fn: 'create_distributed_table',
        table: distributed[1],
        column: distributed[2],
        ...(distributed[3] ? { colocateWith: distributed[3] } : {}),
      })
    } else if (/^create extension if not exists citus$/i.test(statement)) {
      // Needs Citus; nothing to check here.
    } else if (/^(create table|insert into|drop index|create index|create unique index) /i.test(statement)) {
      script.ddl.push(statement)
    } else {
      script.unknown.push(statement)
    }
  }
  return script
}

/** The distributed table every other one is colocated with: the tenant (`accounts`). */
export function colocationAnchor(): string {
  const [anchor] = Object.entries(NON_TENANT_TABLES).filter(([, { placement }]) => placement.kind === 'distributed')
  if (!anchor) {
    throw new Error('test/citus-plan.ts: no distributed non-tenant table to colocate with')
  }
  return anchor[0]
}

export const describePlacement = (placement: Placement | undefined): string =>
  placement === undefined
    ? 'unplanned'
    : placement.kind === 'distributed'
      ? `distributed by ${placement.column}`
      : placement.kind

/**
 * Everything wrong with running `calls` on a database whose catalog (after the script's schema
 * changes) is `catalog`, one line each; empty when the script is complete and in an order Citus
 * takes. It checks what Citus checks at each call — a referenced table is already distributed or a
 * reference table, a distributed table's unique keys hold the distribution column (stricter here:
 * lead with it), colocation with the tenant — and what the plan says: every table named once,
 * with the plan's function and column, coordinator-only tables not named.
 */
export function scriptViolations(catalog: Catalog, calls: ScriptCall[]): string[] {
  const problems: string[] = []
  const anchor = colocationAnchor()
  const tables = new Map(catalog.tables.map((table) => [table.name, table]))
  const placed = new Map<string, Placement>()
  for (const call of calls) {
    const table = tables.get(call.table)
    const label = `${call.fn}('${call.table}')`
    if (!table) {
      problems.push(`${label}: no such table`)
      continue
    }
    if (placed.has(call.table)) {
      problems.push(`${label}: named a second time`)
      continue
    }
    const planned = placementOf(table)
    const done: Placement =
      call.fn === 'create_reference_table' ? { kind: 'reference' } : { kind: 'distributed', column: call.column }
    if (describePlacement(planned) !== describePlacement(done)) {
      problems.push(
        `${label}: the plan says ${describePlacement(planned)}, the script makes it ${describePlacement(done)}`,
      )
    }
    if (call.fn === 'create_distributed_table') {
      const colocation = call.table === anchor ? undefined : anchor
      if (call.colocateWith !== colocation) {
        problems.push(
          `${label}: colocate_with ${call.colocateWith ?? '(none)'}, expected ${colocation ?? '(none: it anchors the group)'}`,
        )
      }
      if (colocation && placed.get(colocation)?.kind !== 'distributed') {
        problems.push(`${label}: colocated with ${colocation} before ${colocation} is distributed`)
      }
      for (const key of catalog.keys) {
        if (key.table === call.table && key.kind !== 'foreign key' && key.columns[0] !== call.column) {
          problems.push(
            `${label}: ${key.name} (${key.kind} on ${key.columns.join(', ')}) does not lead with ${call.column}`,
          )
        }
      }
    }
    for (const key of catalog.keys) {
      if (key.table !== call.table || key.kind !== 'foreign key' || !key.references) {
        continue
      }
      const target = key.references.table
      if (target === call.table) {
        continue
      }
      const targetPlacement = placed.get(target)
      if (!targetPlacement) {
        problems.push(`${label}: ${key.name} references ${target}, which is not yet distributed or a reference table`)
      } else if (done.kind === 'reference' && targetPlacement.kind !== 'reference') {
        problems.push(`${label}: ${key.name}: a reference table can reference only reference tables, not ${target}`)
      }
    }
    placed.set(call.table, done)
  }
  for (const table of catalog.tables) {
    const planned = placementOf(table)
    if (planned && planned.kind !== 'local' && !placed.has(table.name)) {
      problems.push(`${table.name}: ${describePlacement(planned)} by the plan, but the script never names it`)
    }
    if (planned?.kind === 'local' && placed.has(table.name)) {
      problems.push(`${table.name}: coordinator-only by the plan, but the script places it`)
    }
  }
  return problems
}

/** The doc's "Where each table goes" table: each backticked table name with the placement its row states. */
export function documentedPlacements(block: string): Array<{ table: string; placement: string }> {
  const rows: Array<{ table: string; placement: string }> = []
  for (const line of block.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim())
    const [, names, where] = cells
    if (!names || !where || names === 'table' || /^-+$/.test(names)) {
      continue
    }
    const placement = /^distributed by `(\w+)`/.exec(where)?.[1]
    const kind = placement
      ? `distributed by ${placement}`
      : /^reference table/.test(where)
        ? 'reference'
        : /^coordinator only/.test(where)
          ? 'local'
          : `unreadable: ${where}`
    for (const match of names.matchAll(/`(\w+)`/g)) {
      if (match[1]) {
        rows.push({ table: match[1], placement: kind })
      }
    }
  }
  return rows
}

/** The backticked index names of the doc's list of unique indexes that do not lead with account_id. */
export function documentedUniqueWithoutTenant(block: string): string[] {
  return [...block.matchAll(/^\s*[-|]\s*`(\w+)`/gm)].flatMap((match) => (match[1] ? [match[1]] : []))
}
