// The Citus plan as data, and the two checks that hold the schema and the queries to it
// (docs/scale-out.md, "Sharding on Citus"). Citus cannot run here: test/citus-catalog.test.ts
// reads PostgreSQL's catalog and test/citus-statements.test.ts captures the SQL a session sends,
// and both judge what they see with the functions below.
import { sql } from 'kysely'
import type { DatabaseHandle } from '../src/db/database.js'

/** How a table lives on Citus. Every table with `account_id` is distributed by it. */
export type Placement =
  | { kind: 'distributed'; column: string }
  | { kind: 'reference' } // a full copy on every node: joins and foreign keys from any shard
  | { kind: 'local' } // stays on the coordinator only (a plain table there)

/**
 * The tables without `account_id`, each with its placement and why. A new table without
 * `account_id` fails the catalog test until it is listed here.
 */
export const NON_TENANT_TABLES: Record<string, { placement: Placement; reason: string }> = {
  accounts: {
    placement: { kind: 'distributed', column: 'id' },
    reason:
      'the tenant itself: distributed by its id, colocated with every account_id, so each account row sits on its shard and the account_id → accounts(id) foreign keys stay shard-local',
  },
  users: {
    placement: { kind: 'reference' },
    reason:
      'a person belongs to several accounts (memberships → users), and sign-in finds them by email before any account is known',
  },
  sessions: {
    placement: { kind: 'reference' },
    reason:
      'a web session belongs to a person, not an account (sessions → users); written only at sign-in and sign-out',
  },
  sign_in_failures: {
    placement: { kind: 'local' },
    reason: 'the sign-in throttle, keyed by email and address digests before any account is known; no foreign keys',
  },
  event_sequence: {
    placement: { kind: 'local' },
    reason: 'a one-row counter that orders the feed on SQLite only; unused on PostgreSQL',
  },
  webhook_dispatch: {
    placement: { kind: 'local' },
    reason: 'the fan-out cursor: one row for the whole feed (see "The event feed on Citus")',
  },
}

/**
 * Tables the move to Citus creates (docs/scale-out.md, "The schema changes"): absent from the
 * schema before it, placed by the distribution script after it. Both carry `account_id` as a
 * column, not as their distribution column: they are looked up by a digest before any account is
 * known.
 */
export const CITUS_MIGRATION_TABLES: Record<string, { placement: Placement; reason: string }> = {
  api_key_digests: {
    placement: { kind: 'reference' },
    reason: "the key-digest lookup that finds a request's account",
  },
  invitation_digests: {
    placement: { kind: 'reference' },
    reason: "the invitation link's token digest, resolved before any account is known",
  },
}

/**
 * Unique indexes on a tenant table that do not lead with `account_id`: Citus refuses any of them
 * on a distributed table, so each names the reference table that replaces it there (the
 * distribution script drops the index after filling that table).
 */
export const UNIQUE_WITHOUT_TENANT: Record<string, string> = {
  api_keys_key_hash_key:
    'the key-digest lookup finds the account of a request (docs/design.md#identifiers-and-storage); on Citus it moves to the reference table api_key_digests (docs/scale-out.md)',
  invitations_token_hash_key:
    'an invitation link carries only its token, so the link is resolved by digest across accounts; on Citus it moves to the reference table invitation_digests (docs/scale-out.md)',
}

export const TENANT_COLUMN = 'account_id'

export interface CatalogTable {
  name: string
  hasAccountId: boolean
}

export interface CatalogKey {
  name: string
  kind: 'primary key' | 'unique' | 'unique index' | 'foreign key'
  table: string
  columns: string[]
  /** Foreign keys: the referenced table and its columns, in key order. */
  references?: { table: string; columns: string[] }
}

export interface Catalog {
  tables: CatalogTable[]
  keys: CatalogKey[]
}

/** The current schema's tables, keys and unique indexes, as PostgreSQL's catalog states them. */
export async function readCatalog(database: DatabaseHandle): Promise<Catalog> {
  const tables = await sql<{ name: string; has_account_id: boolean }>`
    select c.relname as name, exists (
      select 1 from pg_attribute a
      where a.attrelid = c.oid and a.attname = ${TENANT_COLUMN} and not a.attisdropped) as has_account_id
    from pg_class c
    where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
      and c.relname not like 'kysely\\_%'
    order by 1`.execute(database.db)
  const constraints = await sql<{
    name: string
    kind: 'p' | 'u' | 'f'
    table: string
    columns: string[]
    ref_table: string | null
    ref_columns: string[]
  }>`
    select con.conname as name, con.contype as kind, c.relname as table,
      array(select a.attname::text from unnest(con.conkey) with ordinality k(attnum, n)
        join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum order by k.n) as columns,
      rc.relname as ref_table,
      array(select a.attname::text from unnest(coalesce(con.confkey, '{}')) with ordinality k(attnum, n)
        join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.attnum order by k.n) as ref_columns
    from pg_constraint con
    join pg_class c on c.oid = con.conrelid
    left join pg_class rc on rc.oid = con.confrelid
    where con.connamespace = current_schema()::regnamespace and con.contype in ('p', 'u', 'f')
      and c.relname not like 'kysely\\_%'
    order by 3, 1`.execute(database.db)
  // Unique indexes that no primary-key or unique constraint stands for (the migrations create
  // most unique rules as indexes). An expression column shows as '(expression)'.
  const indexes = await sql<{ name: string; table: string; columns: string[] }>`
    select i.relname as name, c.relname as table,
      array(select coalesce(a.attname::text, '(expression)')
        from unnest(x.indkey::int2[]) with ordinality k(attnum, n)
        left join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.attnum
        where k.n <= x.indnkeyatts order by k.n) as columns
    from pg_index x
    join pg_class i on i.oid = x.indexrelid
    join pg_class c on c.oid = x.indrelid
    where x.indisunique and c.relnamespace = current_schema()::regnamespace
      and c.relname not like 'kysely\\_%'
      and not exists (select 1 from pg_constraint con where con.conindid = x.indexrelid and con.contype in ('p', 'u'))
    order by 2, 1`.execute(database.db)
  const kinds = { p: 'primary key', u: 'unique', f: 'foreign key' } as const
  return {
    tables: tables.rows.map((row) => ({ name: row.name, hasAccountId: row.has_account_id })),
    keys: [
      ...constraints.rows.map(
        (row): CatalogKey => ({
          name: row.name,
          kind: kinds[row.kind],
          table: row.table,
          columns: row.columns,
          ...(row.ref_table === null ? {} : { references: { table: row.ref_table, columns: row.ref_columns } }),
        }),
      ),
      ...indexes.rows.map((row): CatalogKey => ({ ...row, kind: 'unique index' })),
    ],
  }
}

/** Where a table goes on Citus: by the plan above, or by its `account_id`; undefined if unplanned. */
export function placementOf(table: CatalogTable): Placement | undefined {
  const added = CITUS_MIGRATION_TABLES[table.name]
  if (added) {
    return added.placement
  }
  if (table.hasAccountId) {
    return { kind: 'distributed', column: TENANT_COLUMN }
  }
  return NON_TENANT_TABLES[table.name]?.placement
}

/**
 * Everything in the catalog that would stop `create_distributed_table(…, 'account_id')` or break
 * colocation, one readable line each; empty when the schema shards as planned. Stricter than
 * Citus in one way, as docs/design.md#identifiers-and-storage is: the distribution column must lead, not merely be included.
 */
export function shardingViolations(catalog: Catalog): string[] {
  const problems: string[] = []
  const placements = new Map<string, Placement | undefined>()
  for (const table of catalog.tables) {
    const listed = NON_TENANT_TABLES[table.name]
    if (table.hasAccountId && listed) {
      problems.push(`${table.name}: has account_id but is listed as non-tenant (${listed.placement.kind})`)
    }
    const placement = placementOf(table)
    if (!placement) {
      problems.push(`${table.name}: no account_id and no placement on Citus (add it to NON_TENANT_TABLES)`)
    }
    placements.set(table.name, placement)
  }
  for (const name of Object.keys(NON_TENANT_TABLES)) {
    if (!placements.has(name)) {
      problems.push(`${name}: listed in NON_TENANT_TABLES but not in the schema`)
    }
  }
  for (const key of catalog.keys) {
    const placement = placements.get(key.table)
    const label = `${key.table}.${key.name} (${key.kind} on ${key.columns.join(', ')})`
    if (placement?.kind !== 'distributed') {
      if (key.kind === 'foreign key' && key.references) {
        const target = placements.get(key.references.table)
        if (target?.kind === 'distributed') {
          problems.push(
            `${label}: a ${placement?.kind ?? 'unplanned'} table cannot reference the distributed ${key.references.table}`,
          )
        }
      }
      continue
    }
    if (key.kind !== 'foreign key') {
      if (key.columns[0] !== placement.column && !Object.hasOwn(UNIQUE_WITHOUT_TENANT, key.name)) {
        problems.push(`${label}: does not lead with ${placement.column}`)
      }
      continue
    }
    const target = key.references && placements.get(key.references.table)
    if (!key.references || !target) {
      problems.push(`${label}: references an unplanned table`)
    } else if (target.kind === 'local') {
      problems.push(`${label}: a distributed table cannot reference the coordinator-only ${key.references.table}`)
    } else if (target.kind === 'distributed') {
      // Colocated: the distribution columns are paired, first on both sides.
      if (key.columns[0] !== placement.column || key.references.columns[0] !== target.column) {
        problems.push(
          `${label}: must pair ${placement.column} with ${key.references.table}.${target.column} first (references ${key.references.columns.join(', ')})`,
        )
      }
    }
    // A reference table may be referenced on any column: every node holds all of it.
  }
  for (const name of Object.keys(UNIQUE_WITHOUT_TENANT)) {
    if (!catalog.keys.some((key) => key.name === name)) {
      problems.push(`${name}: listed in UNIQUE_WITHOUT_TENANT but not in the schema`)
    }
  }
  return problems
}
