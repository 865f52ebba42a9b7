/**
 * The Node lines the service supports, as package.json's engines and scripts/runtime.mjs say
 * (docs/runtime.md). Below 22 is refused: better-sqlite3's binary crashes Node 20 at the first query.
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
