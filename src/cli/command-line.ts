// The command line that acts on the same data as a running server: the CLI must be given the
// server's database, and its address for the "Try it" line, or a key it makes is refused there.
// The server's start line prints it with those settings filled in.

/** The settings a CLI call shares with the server, in the order they are printed. */
const SHARED = ['DATABASE_URL', 'HOST', 'PORT', 'API_URL', 'KEY_PREFIX'] as const

/** `npm run cli -- ARGS`, preceded by the shared settings set in this environment. */
export function cliCommandLine(env: NodeJS.ProcessEnv, args: string): string {
  const settings: string[] = []
  let postgres = false
  for (const name of SHARED) {
    const value = env[name]
    if (value === undefined || value === '') {
      continue
    }
    // A PostgreSQL URL may hold a password, and this line goes to the log: named, not printed.
    if (name === 'DATABASE_URL' && !value.startsWith('sqlite:')) {
      postgres = true
      continue
    }
    settings.push(`${name}=${shellQuoted(value)}`)
  }
  const line = [...settings, `npm run cli -- ${args}`].join(' ')
  return postgres ? `${line}  (with this server's DATABASE_URL set)` : line
}

const shellQuoted = (value: string): string =>
  /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`
