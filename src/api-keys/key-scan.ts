// Finds API keys in files for `contacts-api scan` (docs/key-safety.md): walks the given paths,
// skips what a commit cannot leak a key through, and reports each key redacted, never whole.
// Synchronous on purpose: one file at a time in a tight loop, findings in a stable order.
import { closeSync, fstatSync, lstatSync, openSync, readdirSync, readSync } from 'node:fs'
import { apiKeySource, isLiveKey, redactApiKey } from './api-key.js'

/** Directories a walk never enters: git's own store and installed packages. */
const SKIPPED_DIRECTORIES = new Set(['.git', 'node_modules'])
/** A NUL byte among the first this many bytes makes a file binary, as git decides. */
const BINARY_SNIFF_BYTES = 8000
/** Larger files are skipped with a note: a hook should not read a database dump whole. */
export const SCAN_MAX_BYTES = 10 * 1024 * 1024
/** A line carrying this is not reported: gitleaks' own marker, so both tools agree. */
const ALLOW_MARKER = 'gitleaks:allow'

/**
 * A key with a word boundary on each side, as RE2 (gitleaks) reads `\b` too: `xservice_live_…`, a
 * 33rd letter or digit, or an underscore either side make it no key.
 */
export const keyScanPattern = (prefix: string): RegExp => new RegExp(`\\b${apiKeySource(prefix)}\\b`, 'g')

export interface ScanReport {
  /** `key` is redacted (`service_live_…AbCd`); `path` as given, with any key-shaped part redacted. */
  finding(path: string, line: number, key: string): void
  /** A path left unread on purpose (a named symbolic link, a file over SCAN_MAX_BYTES, a device). */
  skipped(path: string, why: string): void
  /** A path that could not be read. */
  failed(path: string, why: string): void
}

/**
 * Scans files and directories (recursively; the current directory when `paths` is empty) and
 * returns the number of files read. Symbolic links are never followed.
 */
export function scanPaths(paths: readonly string[], prefix: string, report: ScanReport): number {
  const scanner = new Scanner(prefix, report)
  if (paths.length === 0) {
    scanner.directory('')
  }
  for (const path of paths) {
    scanner.named(path)
  }
  return scanner.files
}

class Scanner {
  files = 0
  private readonly pattern: RegExp
  private readonly needle: Buffer

  constructor(
    private readonly prefix: string,
    private readonly report: ScanReport,
  ) {
    this.pattern = keyScanPattern(prefix)
    // Most files lack the prefix: one byte search skips them without decoding.
    this.needle = Buffer.from(`${prefix}_`)
  }

  /** A path from the command line: scanned even under node_modules; a symbolic link is not followed. */
  named(path: string): void {
    const stats = this.attempt(path, () => lstatSync(path))
    if (stats === undefined) {
      return
    }
    if (stats.isDirectory()) {
      this.directory(path)
    } else if (stats.isFile()) {
      this.file(path)
    } else if (stats.isSymbolicLink()) {
      this.report.skipped(this.safe(path), 'a symbolic link (not followed; end the path with / to scan its directory)')
    } else {
      this.report.skipped(this.safe(path), 'not a regular file')
    }
  }

  directory(dir: string): void {
    const here = dir === '' ? '.' : dir
    const entries = this.attempt(here, () => readdirSync(here, { withFileTypes: true }))
    if (entries === undefined) {
      return
    }
    // Sorted by code unit, not locale: the same order on every machine.
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const entry of entries) {
      const path = join(dir, entry.name)
      // Dirent types come from lstat: a symbolic link is neither a file nor a directory here.
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRECTORIES.has(entry.name)) {
          this.directory(path)
        }
      } else if (entry.isFile()) {
        this.file(path)
      }
    }
  }

  file(path: string): void {
    const content = this.attempt(path, () => readCapped(path))
    if (content === undefined) {
      return
    }
    if (typeof content === 'number') {
      this.report.skipped(this.safe(path), `${content} bytes, over the ${SCAN_MAX_BYTES}-byte limit`)
      return
    }
    this.files++
    if (!content.includes(this.needle) || content.subarray(0, BINARY_SNIFF_BYTES).includes(0)) {
      return
    }
    // latin1 maps each byte to one character: the key's ASCII survives, nothing else can join it.
    const text = content.toString('latin1')
    let line = 1
    let counted = 0
    for (const match of text.matchAll(this.pattern)) {
      line += countNewlines(text, counted, match.index)
      counted = match.index
      if (!lineAt(text, match.index).includes(ALLOW_MARKER)) {
        this.report.finding(this.safe(path), line, this.redact(match[0]))
      }
    }
  }

  private redact(key: string): string {
    return redactApiKey(this.prefix, key.slice(-4), isLiveKey(key, this.prefix))
  }

  /** A path as printed: a file named after a key must not print the key either. */
  private safe(path: string): string {
    return path.includes(`${this.prefix}_`) ? path.replace(this.pattern, (key) => this.redact(key)) : path
  }

  private attempt<T>(path: string, read: () => T): T | undefined {
    try {
      return read()
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      // The code, not the message: Node's messages repeat the path unredacted.
      this.report.failed(this.safe(path), FS_ERRORS[code ?? ''] ?? code ?? 'cannot read')
      return undefined
    }
  }
}

const FS_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ELOOP: 'too many symbolic links',
  ENOTDIR: 'not a directory',
}

/** Children keep the parent exactly as given (`./src/a.ts` under `./src`); the current directory adds nothing. */
function join(dir: string, name: string): string {
  return dir === '' ? name : dir.endsWith('/') ? `${dir}${name}` : `${dir}/${name}`
}

/** The file's bytes, or its size when that is over SCAN_MAX_BYTES. */
function readCapped(path: string): Buffer | number {
  const fd = openSync(path, 'r')
  try {
    const { size } = fstatSync(fd)
    if (size > SCAN_MAX_BYTES) {
      return size
    }
    const buffer = Buffer.allocUnsafe(size)
    let read = 0
    while (read < size) {
      const got = readSync(fd, buffer, read, size - read, null)
      if (got === 0) {
        break
      }
      read += got
    }
    return buffer.subarray(0, read)
  } finally {
    closeSync(fd)
  }
}

function countNewlines(text: string, from: number, to: number): number {
  let count = 0
  for (let at = text.indexOf('\n', from); at !== -1 && at < to; at = text.indexOf('\n', at + 1)) {
    count++
  }
  return count
}

function lineAt(text: string, index: number): string {
  const end = text.indexOf('\n', index)
  return text.slice(text.lastIndexOf('\n', index) + 1, end === -1 ? text.length : end)
}
