// The one way the hot paths keep their SQL: a Statement is SQL text with a value name for each
// parameter position, made once (never per call) and bound per call with `bind`. Its text never
// changes, so SQLite's statement cache and PostgreSQL's named statements (db/database.ts) prepare
// it once per connection. Made either at module load from a template (`sqlFor`), or at first use
// from a query Kysely builds with markers in place of values (`statementFor`, for queries with
// many shapes, such as the contacts list). Why: docs/design.md, "SQL statements".
import { CompiledQuery } from 'kysely'
import type { Dialect } from './dialect.js'

/** SQL text put in as it is (an expression another module owns), not a value. */
export interface RawSql {
  readonly raw: string
}

export const rawSql = (raw: string): RawSql => ({ raw })

export interface Statement<Name extends string> {
  readonly sql: string
  /** The value name of each parameter position. */
  readonly names: readonly Name[]
}

/**
 * A template tag for one dialect: sqlFor('postgres')`… where id = ${'id'}` is `… where id = $1`
 * with names ['id']. PostgreSQL numbers each name once (`$1` again where it recurs); SQLite takes
 * one `?` per occurrence. A rawSql(…) interpolation is put in as text.
 */
export function sqlFor(dialect: Dialect) {
  return <Name extends string>(strings: TemplateStringsArray, ...names: Array<Name | RawSql>): Statement<Name> => {
    const order: Name[] = []
    let text = strings[0] ?? ''
    names.forEach((name, index) => {
      if (typeof name !== 'string') {
        text += name.raw
      } else if (dialect === 'postgres') {
        let position = order.indexOf(name)
        if (position < 0) {
          position = order.push(name) - 1
        }
        text += `$${position + 1}`
      } else {
        order.push(name)
        text += '?'
      }
      text += strings[index + 1] ?? ''
    })
    return { sql: text, names: order }
  }
}

/** One call of a statement: its values in parameter order. */
export function bind<Name extends string>(
  statement: Statement<Name>,
  values: Readonly<Record<Name, unknown>>,
): CompiledQuery {
  return CompiledQuery.raw(
    statement.sql,
    statement.names.map((name) => values[name]),
  )
}

/** A text value's marker in a query built for `statementFor`: the value named `name` goes there. */
export const marker = (name: string): string => `\u0000${name}`

/**
 * The statement of one shape of a query, built with Kysely once per dialect and shape and kept:
 * `build` makes the query with `marker(name)` in place of each text value, and with a number of
 * `numberMarkers` where Kysely wants a number (a LIMIT); each marker comes back as one parameter,
 * which names its position.
 */
export function statementFor<Name extends string>(
  dialect: Dialect,
  key: string,
  build: () => { compiled: CompiledQuery; suffix?: string },
  numberMarkers: Readonly<Record<number, Name>> = {},
): Statement<Name> {
  const cacheKey = `${dialect}|${key}`
  let statement = statements.get(cacheKey) as Statement<Name> | undefined
  if (!statement) {
    const { compiled, suffix } = build()
    const names = compiled.parameters.map((parameter): Name => {
      const named =
        typeof parameter === 'number'
          ? numberMarkers[parameter]
          : typeof parameter === 'string' && parameter.startsWith('\u0000')
            ? (parameter.slice(1) as Name)
            : undefined
      if (named === undefined) {
        throw new Error(`statement ${key}: a parameter without a marker (${String(parameter)})`)
      }
      return named
    })
    statement = { sql: suffix ? `${compiled.sql} ${suffix}` : compiled.sql, names }
    statements.set(cacheKey, statement)
  }
  return statement
}

/** Every statement made by statementFor: a few dozen shapes per dialect. */
const statements = new Map<string, Statement<string>>()
