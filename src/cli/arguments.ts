// The command line's argument checks: each refusal is a UsageError (exit 2, printed as it is).
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util'

export class UsageError extends Error {}

/** A command's flags and positionals; an unknown or malformed flag is a UsageError of one line. */
export function parseArguments<O extends ParseArgsOptionsConfig>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(error instanceof Error ? (error.message.split('\n')[0] ?? 'bad arguments') : String(error))
  }
}

export function noExtra(args: string[]): void {
  if (args.length > 0) {
    throw new UsageError(`unexpected argument "${args[0]}"`)
  }
}

/** An id given as an argument: far longer than any id, short enough to print back in an error. */
export const ID_ARGUMENT_MAX = 256

export function requireText(value: string | undefined, flag: string, max: number): string {
  const text = value?.trim()
  if (!text || text.length > max || text.includes('\u0000')) {
    throw new UsageError(`${flag} needs a value of 1-${max} characters`)
  }
  return text
}

/** Strict RFC 3339 with an explicit offset; rejects impossible dates such as February 30. */
export function parseRfc3339(value: string, flag: string): Date {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,3})?(Z|[+-]\d{2}:\d{2})$/i.exec(value)
  const date = new Date(value)
  const [, year, month, day, hour, minute, second] = match ?? []
  const valid =
    match !== null &&
    !Number.isNaN(date.getTime()) &&
    // Date rolls 2027-02-30 over to March: compare the fields it read with the ones given.
    new Date(Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second)))
      .toISOString()
      .startsWith(`${year}-${month}-${day}T${hour}:${minute}:${second}`)
  if (!valid) {
    throw new UsageError(`${flag} must be an RFC 3339 time with an offset, e.g. 2027-01-01T00:00:00Z (got "${value}")`)
  }
  return date
}
