#!/usr/bin/env node
// The project's Node runtime (docs/runtime.md). Plain JavaScript with no dependencies, because it
// runs under whatever Node the machine has, Node 20 included, before anything else is installed.
//
//   node scripts/runtime.mjs link             npm ci's postinstall: on a supported Node, nothing;
//                                             otherwise the registry's Node 24 into
//                                             node_modules/.runtime, linked as node_modules/.bin/node
//   node scripts/runtime.mjs install LINE DIR  Node LINE (22, 24, 26) into DIR; prints its bin folder
//                                             (.ci/run's legs)
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Keep in step with package.json's engines and src/runtime.ts. */
const SUPPORTED_LINES = [22, 24, 26]
/** The line brought for an unsupported Node: the middle one, the line CI's main leg runs on. */
const BROUGHT_LINE = 24

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const major = Number(process.versions.node.split('.')[0])
// The registry publishes each Node release as node-<platform>-<arch> (binary and headers).
const runtimePackage = `node-${process.platform}-${process.arch}`

/** Installs the newest release of a Node line into dir; returns the node binary's path. */
function install(line, dir) {
  mkdirSync(dir, { recursive: true })
  // Through the npm that runs us when npm does (its own config, registry and cache), else npm on PATH.
  const npmCli = process.env.npm_execpath
  const [command, prefix] = npmCli?.endsWith('.js') ? [process.execPath, [npmCli]] : ['npm', []]
  const args = [...prefix, 'install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund']
  const result = spawnSync(command, [...args, '--loglevel=error', `${runtimePackage}@${line}`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const binary = join(dir, 'node_modules', runtimePackage, 'bin', 'node')
  if (result.status !== 0 || !existsSync(binary)) {
    return undefined
  }
  return binary
}

function version(binary) {
  return spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.trim()
}

function link() {
  if (SUPPORTED_LINES.includes(major)) {
    return 0
  }
  const dir = join(root, 'node_modules', '.runtime')
  const binary = install(BROUGHT_LINE, dir)
  if (binary === undefined) {
    process.stderr.write(
      `contacts-api needs Node ${SUPPORTED_LINES.join(', ')}; this is Node ${process.version}, and ` +
        `${runtimePackage}@${BROUGHT_LINE} could not be installed from the npm registry.\n` +
        `Fix: install Node ${BROUGHT_LINE} (e.g. \`nvm install ${BROUGHT_LINE}\`), then run \`npm ci\` again.\n`,
    )
    return 1
  }
  // npm puts node_modules/.bin first on PATH for every npm script and npx, so `node` there is this one.
  const bin = join(root, 'node_modules', '.bin')
  mkdirSync(bin, { recursive: true })
  rmSync(join(bin, 'node'), { force: true })
  symlinkSync(relative(bin, binary), join(bin, 'node'))
  process.stderr.write(
    `contacts-api: Node ${process.version} is past its end of life and not supported ` +
      `(${SUPPORTED_LINES.join(', ')}); npm scripts and npx here run Node ${version(binary)} from the npm registry ` +
      `(node_modules/.bin/node). With Node ${SUPPORTED_LINES.join(', ')} installed, run \`npm ci\` again to use it instead.\n`,
  )
  return 0
}

const [command, line, dir] = process.argv.slice(2)
if (command === 'link') {
  process.exitCode = link()
} else if (command === 'install' && SUPPORTED_LINES.includes(Number(line)) && dir) {
  const binary = install(line, resolve(dir))
  if (binary === undefined) {
    process.stderr.write(`runtime: ${runtimePackage}@${line} could not be installed into ${dir}\n`)
    process.exitCode = 1
  } else {
    process.stdout.write(`${dirname(binary)}\n`)
  }
} else {
  process.stderr.write(`usage: node scripts/runtime.mjs link | install <${SUPPORTED_LINES.join('|')}> <dir>\n`)
  process.exitCode = 2
}
