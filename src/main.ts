#!/usr/bin/env node
// Process entry: hands argv to the CLI.
import { runCli } from './cli/cli.js'

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`contacts-api: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exitCode = 1
  },
)
