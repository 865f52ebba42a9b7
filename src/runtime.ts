/**
 * The Node lines the service supports: package.json's engines, scripts/runtime.mjs and CI's legs
 * say the same (docs/runtime.md). Below 22 is refused: better-sqlite3 13's binary crashes the
 * process on Node 20 at the first query, so starting would only defer the crash.
 */
export const SUPPORTED_NODE_LINES = [22, 24, 26] as const

export type RuntimeCheck = { ok: true; warning?: string } | { ok: false; message: string }

/** Checks a Node version (`process.versions.node`, e.g. `24.21.0`) against the supported lines. */
export function checkNodeVersion(version: string): RuntimeCheck {
  const major = Number.parseInt(version, 10)
  const lines = SUPPORTED_NODE_LINES.join(', ')
  if (!(major >= SUPPORTED_NODE_LINES[0])) {
    return {
      ok: false,
      message:
        `contacts-api: Node ${version} is not supported (Node ${lines}). Run it through npm ` +
        '(`npm start`, `npx contacts-api …`), which uses the Node that `npm ci` brought into ' +
        'node_modules/.bin, or install Node 24.',
    }
  }
  if (!(SUPPORTED_NODE_LINES as readonly number[]).includes(major)) {
    return { ok: true, warning: `contacts-api: Node ${version} is untested; the supported lines are ${lines}.` }
  }
  return { ok: true }
}
