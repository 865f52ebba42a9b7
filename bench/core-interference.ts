// How much a busy second core slows the first one, with no shared software at all
// (bench/README.md#two-instances, which it helps to read).
//
//   node --import tsx bench/core-interference.ts [--rounds=5] [--mib=32]
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    mib: { type: 'string', default: '32' },
    worker: { type: 'string' },
  },
})

if (values.worker !== undefined) {
  // A worker: run the work `rounds` times (or until killed), print CPU ms per round.
  const words = (Number(values.mib) * 1024 * 1024) / 4
  // One cycle through every word in random order (Sattolo's shuffle): each step is a cache miss.
  const array = new Uint32Array(words)
  for (let i = 0; i < words; i++) {
    array[i] = i
  }
  for (let i = words - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * i)
    const t = array[i] ?? 0
    array[i] = array[j] ?? 0
    array[j] = t
  }
  const arithmetic = () => {
    let x = 1
    for (let i = 0; i < 60_000_000; i++) {
      x = (Math.imul(x, 48271) + i) | 0
    }
    return x
  }
  const walk = () => {
    let at = 0
    for (let i = 0; i < 6_000_000; i++) {
      at = array[at] ?? 0
    }
    return at
  }
  const work = values.worker === 'walk' ? walk : arithmetic
  for (let round = 0; round < Number(values.rounds); round++) {
    const before = process.cpuUsage()
    work()
    const used = process.cpuUsage(before)
    process.stdout.write(`${((used.user + used.system) / 1000).toFixed(1)}\n`)
  }
  process.exit(0)
}

const hasTaskset = spawnSync('taskset', ['--version']).status === 0
if (!hasTaskset) {
  throw new Error('taskset (util-linux) is needed to pin the processes')
}
const self = ['--import', 'tsx', new URL(import.meta.url).pathname]

/** Time the hypervisor gave to others (steal), in ticks of 10 ms, all CPUs: /proc/stat's 8th figure. */
const steal = () => Number((readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/)[8] ?? 0)
let stolen = 0

/** Runs the work on CPU 0, with CPU 1 idle or busy with the same work; CPU ms per round. */
async function measure(kind: 'arithmetic' | 'walk', neighbour: boolean): Promise<number[]> {
  const other = neighbour
    ? spawn(
        'taskset',
        ['-c', '1', process.execPath, ...self, `--worker=${kind}`, '--rounds=1000', `--mib=${values.mib}`],
        {
          stdio: 'ignore',
        },
      )
    : undefined
  if (other) {
    await new Promise((resolve) => setTimeout(resolve, 1500)) // past its array's set-up
  }
  const stealBefore = steal()
  const run = spawnSync(
    'taskset',
    ['-c', '0', process.execPath, ...self, `--worker=${kind}`, `--rounds=${values.rounds}`, `--mib=${values.mib}`],
    { encoding: 'utf8' },
  )
  other?.kill('SIGKILL')
  stolen += steal() - stealBefore
  return run.stdout.trim().split('\n').map(Number)
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
console.log(`load average at start: ${readFileSync('/proc/loadavg', 'utf8').trim()}`)
for (const kind of ['arithmetic', 'walk'] as const) {
  const alone: number[] = []
  const beside: number[] = []
  // Interleaved, so that a drift of the host affects both.
  stolen = 0
  for (let pass = 0; pass < 3; pass++) {
    alone.push(...(await measure(kind, false)))
    beside.push(...(await measure(kind, true)))
  }
  console.log(
    `${kind.padEnd(10)} CPU 1 idle: ${median(alone).toFixed(1)} ms a round; CPU 1 busy with the same: ${median(beside).toFixed(1)} ms (×${(median(beside) / median(alone)).toFixed(2)}); steal ${stolen * 10} ms; rounds ${alone.join(' ')} | ${beside.join(' ')}`,
  )
}
