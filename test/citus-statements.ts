// How Citus would route a statement, judged from its text, and the queries that are global on
// purpose, each by name with its reason and what it becomes on Citus (docs/scale-out.md).
import type { TestDialect } from './dialects.js'

export interface Statement {
  /** What the session was doing: 'migrations', 'catalog' or 'session'. */
  phase: string
  text: string
}

/** Distributed tables and their distribution column (account_id; accounts: id). */
export type Distribution = ReadonlyMap<string, string>

export type Routing =
  | { kind: 'none' } // touches no distributed table
  | { kind: 'router'; tables: string[] }
  | { kind: 'multi-shard'; tables: string[]; normalized: string }

/** Lower case, no identifier quotes, no comments, one space between words. */
export const normalize = (text: string): string =>
  text
    .replace(/\/\*.*?\*\//gs, ' ')
    .replaceAll('"', '')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim()

/**
 * Router when every mention of a distributed table is tied to one account: by an equality of its
 * distribution column to a parameter (`account_id = $1`, `account_id in ($1)`), by inserting into
 * that column, or by a join equality on it to a table that is. A text check, not a parser; it
 * cannot see: which mention an equality belongs to (it counts them), an `or` that defeats an
 * equality, or that two parameters carry the same account. It errs towards flagging: a statement
 * it calls router has at least as many account equalities as distributed-table mentions.
 */
export function routingOf(text: string, distribution: Distribution): Routing {
  const sql = normalize(text)
  const tables = [...sql.matchAll(/\b(?:from|join|into|update)\s+([a-z_][a-z0-9_]*)/g)]
    .map((match) => match[1] as string)
    .filter((table) => distribution.has(table))
  if (tables.length === 0) {
    return { kind: 'none' }
  }
  const columns = [...new Set(distribution.values())].join('|')
  const count = (pattern: RegExp) => [...sql.matchAll(pattern)].length
  const qualified = '(?:[a-z_][a-z0-9_]*\\.)?'
  let anchors = count(new RegExp(`(?<![a-z_.])${qualified}account_id (?:= \\$\\d+|in \\(\\$\\d+\\))`, 'g'))
  // accounts is distributed by its id: `where id = $1` routes a statement on accounts alone.
  if (tables.every((table) => table === 'accounts')) {
    anchors += count(new RegExp(`(?<![a-z_.])${qualified}id = \\$\\d+`, 'g'))
  }
  // An insert routes each row by the distribution column it writes.
  for (const [, table, list] of sql.matchAll(/\binsert into ([a-z_][a-z0-9_]*) \(([^)]*)\)/g)) {
    const column = distribution.get(table as string)
    if (column && (list as string).split(',').some((name) => name.trim() === column)) {
      anchors += 1
    }
  }
  const joins = count(
    new RegExp(
      `${qualified}(?:${columns}) = ${qualified}account_id\\b|${qualified}account_id = ${qualified}(?:${columns})\\b`,
      'g',
    ),
  )
  return anchors >= 1 && anchors + joins >= tables.length
    ? { kind: 'router', tables }
    : { kind: 'multi-shard', tables, normalized: sql }
}

export interface GlobalQuery {
  name: string
  /** The function (or phase) that sends it. */
  source: string
  /** Why it cannot name one account. */
  reason: string
  /** What it becomes on Citus. */
  onCitus: string
  /** The dialects whose session sends it (the harness's own query is the server's only). */
  dialects: TestDialect[]
  matches(statement: Statement, tables: string[]): boolean
}

const both: TestDialect[] = ['pglite', 'postgres']
const text = (pattern: RegExp) => (statement: Statement) => pattern.test(normalize(statement.text))

/**
 * The statements on distributed tables that cannot name one account. Sign-in by email and the
 * session lookups are not here: they read `users` and `sessions`, reference tables that every
 * node holds whole, so they never leave the node they arrive at.
 */
export const GLOBAL_QUERIES: GlobalQuery[] = [
  {
    name: 'key-digest lookup',
    source: 'findKeyByHash (src/api-keys/api-keys.store.ts), on a key-cache miss',
    reason: 'a request is authenticated before its account is known: the key names it',
    onCitus:
      'a router query on the reference table api_key_digests (key_hash → account_id, key_id), then the key and account rows by account_id',
    dialects: both,
    matches: text(
      / from api_keys inner join accounts on accounts\.id = api_keys\.account_id where api_keys\.key_hash = \$1$/,
    ),
  },
  {
    name: 'key by id for the command line',
    source: 'findApiKeyById (src/api-keys/api-keys.store.ts): `contacts-api keys revoke KEY_ID`',
    reason: 'an operator names a key without its account',
    onCitus: 'a multi-shard select on the api_keys_id_idx of every shard; rare (by hand)',
    dialects: both,
    matches: text(/^select \* from api_keys where id = \$1$/),
  },
  {
    name: "a person's accounts",
    source: 'listMemberships (src/users/users.store.ts): sign-in and the account switcher',
    reason: 'a person belongs to several accounts, found by their user id',
    onCitus: 'a multi-shard colocated join (memberships ⋈ accounts on account_id = id); per web page view',
    dialects: both,
    matches: text(
      / from memberships inner join accounts on accounts\.id = memberships\.account_id where memberships\.user_id = \$1 /,
    ),
  },
  {
    name: 'accounts a person owns',
    source: 'countOwnedAccounts (src/accounts/owned-accounts.ts): MAX_ACCOUNTS_PER_PERSON at sign-up and "new account"',
    reason: "a person's accounts are spread over every account, found by their user id",
    onCitus: 'a multi-shard count on memberships; once per account creation',
    dialects: both,
    matches: text(/^select count\(\*\) as count from memberships where user_id = \$1 and role = \$2$/),
  },
  {
    name: 'invitation link lookup',
    source: 'findPendingInvitation (src/invitations/invitations.store.ts): opening and accepting an invitation link',
    reason: 'the link carries only its token: the invitation and its account are found by the digest',
    onCitus:
      'a router query on the reference table invitation_digests (token_hash → account_id, invitation_id), then the invitation and account rows by account_id (docs/scale-out.md)',
    dialects: both,
    matches: text(
      / from invitations inner join accounts on accounts\.id = invitations\.account_id where invitations\.token_hash = \$1$/,
    ),
  },
  {
    name: 'invitations sent from one address',
    source:
      'the invitation throttle (src/invitations/invitations.store.ts): 20 an hour per client address across accounts',
    reason: 'an abuser inviting from many accounts is counted by address, not by account',
    onCitus:
      'a multi-shard top-1 per invitation sent; or a per-address counter in Redis or a coordinator table, as the sign-in throttle keeps its counts',
    dialects: both,
    matches: text(
      /^select created_at from invitations where client_key_hash = \$1 and created_at > \$2 order by created_at desc limit \$3$/,
    ),
  },
  {
    name: 'CSV imports due',
    source: 'the import runner (src/imports/import-runner.ts): claims queued or abandoned imports across accounts',
    reason: 'a runner serves every account, as the webhook worker does',
    onCitus: 'a multi-shard top-N on the partial index of unfinished imports, each poll; the claim itself is routed',
    dialects: both,
    matches: text(
      /^select account_id, id from contact_imports where state in \('queued', 'validating', 'writing'\) and \(lease_expires_at is null or lease_expires_at < \$1\) order by created_at limit \$2$/,
    ),
  },
  {
    name: 'any account yet',
    source: 'hasAnyAccount (src/accounts/accounts.store.ts): `serve` at start',
    reason: 'a fresh install says how to make a first account',
    onCitus: 'a multi-shard select … limit 1, once per start',
    dialects: both,
    matches: text(/^select id from accounts limit \$1$/),
  },
  {
    name: 'fan-out: anything new in the feed',
    source: 'hasUndispatchedEvents (src/webhooks/delivery-dispatch.ts), each worker tick',
    reason: 'the fan-out walks one feed of all accounts in position order',
    onCitus: 'multi-shard; see "The event feed on Citus": replaced by a per-account cursor',
    dialects: both,
    matches: text(/^select id from events where \(tx_id, id\) > \(\$1, \$2\) /),
  },
  {
    name: 'fan-out: the next batch of events',
    source: 'dispatchEvents (src/webhooks/delivery-dispatch.ts)',
    reason: 'as above: one cursor over every account’s events',
    onCitus: 'multi-shard with a global order it cannot have: see "The event feed on Citus"',
    dialects: both,
    matches: text(/^select account_id, id, type, created_at, tx_id from events where \(tx_id, id\) > \(\$1, \$2\) /),
  },
  {
    name: "fan-out: the batch's endpoints",
    source: 'dispatchEvents (src/webhooks/delivery-dispatch.ts)',
    reason: 'one batch holds the events of several accounts: account_id in (…) of each',
    onCitus: 'a multi-shard select pruned to the shards of the listed accounts',
    dialects: both,
    matches: text(/ from webhook_endpoints where account_id in \(\$1(?:, \$\d+)+\) and status = /),
  },
  {
    name: "the worker's claim of due endpoints",
    source: 'dueEndpoints (src/webhooks/delivery-claim.ts), each worker tick',
    reason: 'a worker serves every account: it looks for whatever endpoint is due first',
    onCitus:
      'a multi-shard top-N (each shard sends its first N by due_at, the coordinator merges); the claim that follows is a router transaction',
    dialects: both,
    matches: text(
      /^select account_id, id from webhook_endpoints where due_at <= \$1 and status = \$2 order by due_at limit \$3$/,
    ),
  },
  {
    name: 'retention purge of events, deliveries and finished imports',
    source: 'purgeOlderThan (src/db/retention.ts): `serve` at start and hourly',
    reason: 'retention is by age across all accounts',
    onCitus:
      'run per shard (run_command_on_shards or per-account batches); a multi-shard delete with a limited subquery is planned recursively',
    dialects: both,
    matches: text(
      /^delete from (events|webhook_deliveries|contact_imports) where \(account_id, id\) in \( select account_id, id from \1 where (created_at|finished_at) < \$1 limit \$2\)$/,
    ),
  },
  {
    name: 'request log purge: the tenants with old entries',
    source: 'purgeExpiredRequestLogs (src/request-logs/request-logs.store.ts): `serve` at start and hourly',
    reason: 'retention is by age across all accounts; the purge then deletes tenant by tenant',
    onCitus: 'a multi-shard select on the small request_log_days table, hourly',
    dialects: both,
    matches: text(/^select distinct account_id from request_log_days where day <= \$1$/),
  },
  {
    name: 'idempotency expiry purge',
    source: 'purgeExpiredIdempotencyKeys (src/idempotency/idempotency.ts): `serve` at start and hourly',
    reason: 'expiry is by age across all accounts',
    onCitus: 'a multi-shard delete, run in parallel on every shard',
    dialects: both,
    matches: text(/^delete from idempotency_keys where expires_at <= \$1$/),
  },
  {
    name: 'webhook queue depth gauge',
    source: 'webhook_queue_depth in src/observability/metrics.ts, per /metrics scrape',
    reason: 'a service-wide gauge',
    onCitus: 'a multi-shard count per scrape',
    dialects: both,
    matches: text(/^select count\(\*\) as n from webhook_deliveries where next_attempt_at is not null$/),
  },
  {
    name: 'migrations',
    source: 'src/db/migrations (their backfills: contact terms, contact counts, the dispatch cursor)',
    reason: 'a migration changes every account’s rows',
    onCitus: 'DDL propagates to the shards; backfills run as multi-shard statements',
    // The PGlite leg starts from a migrated dump: only the server's throwaway schema migrates here.
    dialects: ['postgres'],
    matches: (statement) => statement.phase === 'migrations',
  },
  {
    name: "the test harness's feed wait",
    source: 'feedCaughtUp (test/harness.ts), not the app',
    reason: 'waits for the server-wide snapshot fence before a test reads the feed',
    onCitus: 'not applicable (test code)',
    dialects: ['postgres'],
    matches: text(
      /^select coalesce\(max\(tx_id\), 0\) < pg_snapshot_xmin\(pg_current_snapshot\(\)\)::text::bigint as caught_up from events$/,
    ),
  },
]
