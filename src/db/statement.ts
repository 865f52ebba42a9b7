// SQL written once, with named values, for the hottest writes: `sqlFor(dialect)` turns a template
// whose interpolations are value names into the dialect's text with positional parameters, once at
// module load; `bind` makes the CompiledQuery of one call. Nothing is built or compiled per call
// (a Kysely query builder costs 5-30 µs a statement to build and compile; docs/performance.md,
// "Writes on PostgreSQL"), and the text never changes, so SQLite's statement cache and
// PostgreSQL's named statements (db/database.ts) prepare it once per connection.
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
 * A template tag for one dialect: sqlFor('postgres')`… where id = ${'id'}` is
 * `… where id = $1` with names ['id']. PostgreSQL numbers each name once (`$1` again where it
 * recurs); SQLite takes one `?` per occurrence. A rawSql(…) interpolation is put in as text.
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
