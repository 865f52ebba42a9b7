// Summarizes a V8 .cpuprofile (from `npm run bench -- --cpu-prof`, or `node --cpu-prof`): the
// functions with the most time, self or inclusive, as a share of the busy (non-idle) time.
// Usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [self|inclusive] [rows]
import { readFileSync } from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const [file, mode = 'self', rows = '40'] = process.argv.slice(2)
if (!file || (mode !== 'self' && mode !== 'inclusive')) {
  console.error('usage: bench/profile-summary.ts FILE.cpuprofile [self|inclusive] [rows]')
  process.exit(2)
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const parent = new Map<number, number>()
for (const node of profile.nodes) {
  for (const child of node.children ?? []) {
    parent.set(child, node.id)
  }
}
const label = (node: ProfileNode) => {
  const url = node.callFrame.url.replace(/.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|src)\//, '$1/')
  return `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`
}
const timeByNode = new Map<number, number>()
profile.samples.forEach((id, i) => {
  timeByNode.set(id, (timeByNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})
const totals = new Map<string, number>()
let total = 0
let idle = 0
for (const [id, time] of timeByNode) {
  const node = byId.get(id)
  if (!node) {
    continue
  }
  total += time
  if (node.callFrame.functionName === '(idle)') {
    idle += time
  }
  if (mode === 'self') {
    totals.set(label(node), (totals.get(label(node)) ?? 0) + time)
    continue
  }
  // Inclusive: every distinct frame on the sample's stack gets the time once.
  const seen = new Set<string>()
  for (let current: number | undefined = id; current !== undefined; current = parent.get(current)) {
    const frame = byId.get(current)
    if (frame && !seen.has(label(frame))) {
      seen.add(label(frame))
      totals.set(label(frame), (totals.get(label(frame)) ?? 0) + time)
    }
  }
}
const busy = total - idle
for (const [name, time] of [...totals]
  .filter(([name]) => !name.startsWith('(idle)'))
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(rows))) {
  console.log(`${(time / 1000).toFixed(1).padStart(9)} ms ${((100 * time) / busy).toFixed(1).padStart(5)}%  ${name}`)
}
console.log(`total ${(total / 1000).toFixed(0)} ms, busy ${(busy / 1000).toFixed(0)} ms (${mode})`)
