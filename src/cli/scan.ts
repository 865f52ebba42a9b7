// `contacts-api scan [PATH…]`: reports API keys in files, redacted, for pre-commit hooks and CI
// (docs/key-safety.md). Exit 1 when it finds one, 2 on bad arguments or an unreadable path. It
// loads none of the server's modules and reads no configuration but KEY_PREFIX.
import { parseArgs } from 'node:util'
import { SCAN_MAX_BYTES, scanPaths } from '../api-keys/key-scan.js'
import { ConfigError, isKeyPrefix, loadKeyPrefix } from '../config.js'
import { redactKeys } from '../observability/logger.js'
import { type CliIo, processIo } from './io.js'

const SCAN_USAGE = `Usage: contacts-api scan [--prefix PREFIX] [--json] [PATH...]

  Reports every API key (PREFIX_live_ or PREFIX_test_ and 32 letters or digits) in the files
  named, and in the directories named (recursively; the current directory when no PATH is given),
  one line per key, never the whole key:  path:line: service_live_…AbCd

  --prefix PREFIX   the keys' prefix (default: KEY_PREFIX, else service)
  --json            print one JSON object instead of lines

  Skipped: .git and node_modules directories met in a walk, symbolic links, binary files (a NUL
  byte in the first 8000 bytes), files over ${SCAN_MAX_BYTES / (1024 * 1024)} MiB (noted on stderr), and lines containing
  gitleaks:allow. Exit 0: no key; 1: a key found; 2: bad arguments, or a path could not be read.`

const OPTIONS = {
  prefix: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

interface Finding {
  path: string
  line: number
  key: string
}
interface Problem {
  path: string
  reason: string
}

/** Runs `scan` with the arguments after the word scan; returns the exit code. */
export async function runScan(args: string[], env = process.env, io: CliIo = processIo): Promise<number> {
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(args)
  } catch (error) {
    const reason = (error as Error).message.split('\n')[0] ?? 'bad arguments'
    return usageError(io, `${reason}; see contacts-api scan --help`)
  }
  const { values, positionals: paths } = parsed
  if (values.help) {
    io.out(SCAN_USAGE)
    return 0
  }
  if (values.prefix !== undefined && !isKeyPrefix(values.prefix)) {
    return usageError(io, `--prefix must be 1-20 lowercase letters or digits (got "${values.prefix}")`)
  }
  let prefix: string
  try {
    prefix = values.prefix ?? loadKeyPrefix(env)
  } catch (error) {
    if (error instanceof ConfigError) {
      return usageError(io, `invalid configuration: ${error.problems.join('; ')}`)
    }
    throw error
  }
  return scan(paths, prefix, values.json === true, io)
}

function scan(paths: string[], prefix: string, json: boolean, io: CliIo): number {
  const findings: Finding[] = []
  const skipped: Problem[] = []
  const failed: Problem[] = []
  const files = scanPaths(paths, prefix, {
    finding(path, line, key) {
      findings.push({ path, line, key })
      if (!json) {
        io.out(`${path}:${line}: ${key}`)
      }
    },
    skipped(path, reason) {
      skipped.push({ path, reason })
      if (!json) {
        io.err(`contacts-api: scan: skipped ${path}: ${reason}`)
      }
    },
    failed(path, reason) {
      failed.push({ path, reason })
      if (!json) {
        io.err(`contacts-api: scan: cannot read ${path}: ${reason}`)
      }
    },
  })
  if (json) {
    io.out(JSON.stringify({ findings, skipped, failed, files_scanned: files }))
  } else if (findings.length > 0) {
    const count = findings.length === 1 ? '1 API key' : `${findings.length} API keys`
    io.err(
      `contacts-api: scan: ${count} in ${files} files scanned. Take each out of its file, and roll it if it ` +
        'was ever committed or shared (docs/key-safety.md).',
    )
  }
  return findings.length > 0 ? 1 : failed.length > 0 ? 2 : 0
}

/** A usage or configuration error: one line, with anything key-shaped in what was typed redacted. */
function usageError(io: CliIo, message: string): number {
  io.err(`contacts-api: scan: ${redactKeys(message)}`)
  return 2
}

function parse(args: string[]) {
  return parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true })
}
