// Operations in a real process: SIGTERM under load drains what is in flight and exits 0;
// a configured but unreachable Redis stops the start with a clear message.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { cliCommand, freePort, startServerProcess } from './processes.js'
import { httpSignUp } from './web-client.js'

describe('operations in a real process', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-ops-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('SIGTERM under load: every request in flight when the signal arrives succeeds, and the exit code is 0', async () => {
    const env = { DATABASE_URL: `sqlite:${path.join(dir, 'load.sqlite')}`, RATE_LIMIT_PER_SECOND: '0' }
    const out: string[] = []
    await runCli(['accounts', 'create', '--name', 'Load', '--json'], env, { out: (t) => out.push(t), err: () => {} })
    const key = JSON.parse(out[0] ?? '{}').api_key.secret as string
    const server = await startServerProcess(env)

    let signalAt = Number.POSITIVE_INFINITY
    const results: Array<{ n: number; i: number; started: number; ended: number; status: number }> = []
    const worker = async (n: number) => {
      for (let i = 0; Date.now() < signalAt + 1000 && i < 10_000; i++) {
        const started = Date.now()
        if (started >= signalAt) {
          return // the load balancer would send this elsewhere now
        }
        const status = await fetch(`${server.base}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: `Worker ${n}`, custom_fields: { i } }),
        }).then(
          (res) => res.status,
          () => 0,
        )
        results.push({ n, i, started, ended: Date.now(), status })
      }
    }
    const workers = Array.from({ length: 16 }, (_, n) => worker(n))
    await new Promise((r) => setTimeout(r, 1500))
    signalAt = Date.now()
    const code = await server.stop('SIGTERM')
    await Promise.all(workers)

    // Started well before the signal (so the server had the request) and not finished by then.
    const inFlight = results.filter((r) => r.started < signalAt - 20 && r.ended >= signalAt)
    console.log(`shutdown: ${results.length} requests, ${inFlight.length} in flight at SIGTERM, exit ${code}`)
    // A request the server never read (its keep-alive connection closed as idle while the request was
    // still on its way: no answer at all, and nothing stored) is one a load balancer would retry; any
    // other failure of a request sent before the signal is not.
    const failed = results.filter((r) => r.started < signalAt - 20 && r.status !== 201)
    const db = new SQLite(path.join(dir, 'load.sqlite'), { readonly: true })
    const stored = db.prepare(
      "select count(*) as n from contacts where json_extract(body, '$.first_name') = ? and cast(json_extract(body, '$.custom_fields.i') as text) = ?",
    )
    const processed = failed.filter(
      (r) => r.status !== 0 || (stored.get(`Worker ${r.n}`, String(r.i)) as { n: number }).n > 0,
    )
    db.close()
    expect(processed, JSON.stringify(failed)).toEqual([])
    // At most one such request per connection, as each is closed once.
    expect(failed.length).toBeLessThanOrEqual(16)
    expect(code).toBe(0)
    expect(results.length).toBeGreaterThan(50)
  })

  it('SIGTERM while a long poll waits: the poll answers at once, empty with its cursor, and the exit is quick', async () => {
    const env = { DATABASE_URL: `sqlite:${path.join(dir, 'poll.sqlite')}` }
    const out: string[] = []
    await runCli(['accounts', 'create', '--name', 'Poll', '--json'], env, { out: (t) => out.push(t), err: () => {} })
    const key = JSON.parse(out[0] ?? '{}').api_key.secret as string
    const server = await startServerProcess(env)
    const poll = fetch(`${server.base}/api/v1/events?from=now&wait=30`, { headers: { authorization: `Bearer ${key}` } })
    await new Promise((r) => setTimeout(r, 500))
    const signalled = Date.now()
    const code = await server.stop('SIGTERM')
    const answer = await poll
    // A 30 s wait held to its end would hold the stop as long.
    expect(Date.now() - signalled).toBeLessThan(10_000)
    expect(code).toBe(0)
    expect(answer.status).toBe(200)
    const page = (await answer.json()) as { events: unknown[]; next_cursor: string }
    expect(page.events).toEqual([])
    expect(page.next_cursor).toEqual(expect.any(String))
  })

  it('SIGTERM while a CSV export streams (SQLite file: read on the import worker): the download completes', async () => {
    const server = await startServerProcess({
      DATABASE_URL: `sqlite:${path.join(dir, 'export.sqlite')}`,
      RATE_LIMIT_PER_SECOND: '0',
    })
    const { web, accountId } = await httpSignUp(server.base, 'export@example.com', 'Export')
    const rows = 5000
    const pad = 'x'.repeat(200)
    await web.get(`/app/${accountId}/contacts/import`)
    const lines = [
      'email,first_name,job_title',
      ...Array.from({ length: rows }, (_, i) => `e${i}@example.com,E ${i},${pad}`),
    ]
    const job = (await web.upload(`/app/${accountId}/contacts/import`, 'e.csv', lines.join('\n'))).location ?? ''
    let page = await web.get(job)
    for (const deadline = Date.now() + 60_000; page.refresh && Date.now() < deadline; page = await web.get(job)) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(page.body).toContain(`Import finished: ${rows} created`)

    // A slow reader (1.2 MB at 64 KB per 20 ms): the signal arrives after the first bytes, while
    // the server still has pages to read.
    const res = await fetch(`${server.base}/app/${accountId}/contacts/export.csv`, {
      headers: { cookie: web.cookie() },
    })
    expect(res.status).toBe(200)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const chunks: Uint8Array[] = []
    let stopping: Promise<number | null> | undefined
    for (;;) {
      const { done, value } = await reader.read()
      if (done) {
        break
      }
      chunks.push(value)
      stopping ??= server.stop('SIGTERM')
      await new Promise((resolve) => setTimeout(resolve, 20 * (value.length / 65536)))
    }
    const csv = Buffer.concat(chunks).toString('utf8')
    expect(csv.split('\r\n')).toHaveLength(1 + rows + 1)
    expect(csv.split('\r\n').at(-2)).toContain(`e${rows - 1}@example.com`)
    // Exits once the download ends, not keepAliveTimeout (72 s) later: the test's time limit.
    expect(await stopping).toBe(0)
  }, 60_000)

  it('REDIS_URL set but Redis unreachable: the start fails at once with a clear message', async () => {
    const child = spawn(process.execPath, [...cliCommand(), 'serve'], {
      env: {
        ...process.env,
        DATABASE_URL: `sqlite:${path.join(dir, 'redis.sqlite')}`,
        REDIS_URL: 'redis://127.0.0.1:1',
        PORT: String(await freePort()),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr?.on('data', (chunk) => {
      stderr += chunk
    })
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    expect(code).not.toBe(0)
    expect(stderr).toContain('REDIS_URL is set but Redis is unreachable')
  })
})
