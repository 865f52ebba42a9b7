// Two readings of the machine itself, taken beside a measurement so that runs on different days or
// hosts can be told apart from changes in the code: how long the disk takes to make a small write
// durable (what every PostgreSQL commit waits for), and how long a fixed piece of JavaScript takes
// on one core. A commit-bound load moves with the first, a CPU-bound one with the second.
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export interface MachineReading {
  /** Median and 90th percentile of an 8 KiB write followed by fdatasync, µs. */
  fdatasyncP50Us: number
  fdatasyncP90Us: number
  /** A fixed integer loop, ms: lower is a faster core. */
  cpuLoopMs: number
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

export function readMachine(directory = os.tmpdir(), syncs = 200): MachineReading {
  const file = path.join(directory, `machine-probe-${process.pid}.tmp`)
  const fd = openSync(file, 'w')
  const page = Buffer.alloc(8192, 1)
  const times: number[] = []
  try {
    for (let i = 0; i < syncs; i++) {
      const started = process.hrtime.bigint()
      writeSync(fd, page, 0, page.length, (i % 16) * page.length)
      fdatasyncSync(fd)
      times.push(Number(process.hrtime.bigint() - started) / 1000)
    }
  } finally {
    closeSync(fd)
    rmSync(file, { force: true })
  }
  times.sort((a, b) => a - b)
  const started = process.hrtime.bigint()
  let sum = 0
  for (let i = 0; i < 100_000_000; i++) {
    sum += i % 7
  }
  // `sum` is used, so the loop cannot be optimized away; it is never negative.
  const cpuLoopMs = Number(process.hrtime.bigint() - started) / 1e6 + (sum < 0 ? 1 : 0)
  return { fdatasyncP50Us: percentile(times, 0.5), fdatasyncP90Us: percentile(times, 0.9), cpuLoopMs }
}

export const describeMachine = (reading: MachineReading): string =>
  `fdatasync p50 ${reading.fdatasyncP50Us.toFixed(0)} µs, p90 ${reading.fdatasyncP90Us.toFixed(0)} µs; CPU loop ${reading.cpuLoopMs.toFixed(0)} ms`
