// The README's path, as a user runs it: `serve` in its own process on a real port, a key from the
// CLI, requests over TCP, then SIGTERM: in-flight requests finish, the request log is written, and
// the process exits 0.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { type AddressInfo, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../packages/client/src/index.js'
import { runCli } from '../src/cli/cli.js'
import { openDatabase } from '../src/db/database.js'
import type { RequestLog } from '../src/request-logs/request-log.js'
import { listRequestLogRows } from '../src/request-logs/request-logs.store.js'
import { testDialects } from './dialects.js'
import { createThrowawaySchema } from './harness.js'
import { cliCommand, freePort } from './processes.js'

const PORT = await freePort()
const base = `http://127.0.0.1:${PORT}`

describe('contacts-api serve in a real process', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-serve-'))
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite:${path.join(dir, 'contacts.sqlite')}`,
    PORT: String(PORT),
    LOG_LEVEL: 'info',
  }
  let server: ChildProcess
  let stdout = ''
  let stderr = ''
  let key = ''
  let accountId = ''
  let pastedAccount = ''

  beforeAll(async () => {
    server = spawn(process.execPath, [...cliCommand(), 'serve'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    server.stdout?.on('data', (chunk) => {
      stdout += chunk
    })
    await new Promise<void>((resolve, reject) => {
      server.stderr?.on('data', (chunk) => {
        stderr += chunk
        if (stderr.includes('accounts create --name Acme')) {
          resolve()
        }
      })
      server.once('exit', (code) => reject(new Error(`serve exited early (${code}): ${stderr}`)))
    })
  })
  afterAll(() => {
    server.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  it('tells a new user how to get a first key, with the settings that reach this server', async () => {
    expect(stderr).toContain(`Contacts API listening on http://127.0.0.1:${PORT}`)
    const hint = /Create one and its first API key: {2}(.*)$/m.exec(stderr)?.[1] ?? ''
    expect(hint).toMatch(/ npm run cli -- accounts create --name Acme$/)
    // The line as a user pastes it in a new terminal: its settings, and nothing of this one's.
    const settings = Object.fromEntries([...hint.matchAll(/(\w+)=(\S+) /g)].map((m) => [m[1], m[2]]))
    expect(settings).toMatchObject({ DATABASE_URL: env.DATABASE_URL, PORT: String(PORT) })
    const out: string[] = []
    const { DATABASE_URL: _db, PORT: _port, ...terminal } = process.env
    const code = await runCli(
      ['accounts', 'create', '--name', 'Pasted'],
      { ...terminal, ...settings },
      {
        out: (t) => out.push(t),
        err: () => {},
      },
    )
    expect(code).toBe(0)
    pastedAccount = /Created account (acct_\w+)/.exec(out.join('\n'))?.[1] ?? ''
    const tryIt = /^Try it:.*$/m.exec(out.join('\n'))?.[0] ?? ''
    expect(tryIt).toContain(`${base}/api/v1/me`)
    const pasted = /Bearer (\S+)"/.exec(tryIt)?.[1] ?? ''
    const me = await fetch(`${base}/api/v1/me`, { headers: { authorization: `Bearer ${pasted}` } })
    expect(me.status).toBe(200)
  })

  it('names the Node version it runs on in its start line', () => {
    expect(stderr).toContain(`listening on http://127.0.0.1:${PORT} (Node ${process.versions.node};`)
  })

  it('accepts a key made by the CLI on the same database, and logs one redacted line per request', async () => {
    const out: string[] = []
    const code = await runCli(['accounts', 'create', '--name', 'Acme', '--json'], env, {
      out: (t) => out.push(t),
      err: () => {},
    })
    expect(code).toBe(0)
    const { account, api_key } = JSON.parse(out[0] ?? '{}')
    key = api_key.secret
    accountId = account.id
    // As a client developer would: through the SDK (packages/client).
    const client = createClient({ baseUrl: base, apiKey: api_key.secret })
    expect((await client.me()).id).toBe(account.id)
    const created = await client.contacts.create({ email: 'ada@example.com' })
    expect(created).toMatchObject({ object: 'contact', email: 'ada@example.com' })
    // The key pasted into a URL is redacted in the log too.
    await fetch(`${base}/api/v1/me?api_key=${api_key.secret}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const lines = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    // This test's requests: the one before made another account's GET /me.
    const requests = lines.filter((line) => line.msg === 'request' && line.account_id !== pastedAccount)
    expect(requests.map((line) => [line.method, line.status])).toEqual([
      ['GET', 200],
      ['POST', 201],
      ['GET', 401],
    ])
    expect(requests[0]).toMatchObject({
      url: '/api/v1/me',
      account_id: account.id,
      reqId: expect.stringMatching(/^req_/),
    })
    expect(stdout).not.toContain(api_key.secret)
    expect(stdout.toLowerCase()).not.toContain('authorization')
  })

  it('on SIGTERM finishes a request still in flight, then exits 0', async () => {
    // A POST whose body is half sent when SIGTERM arrives: the server must still answer it.
    const body = JSON.stringify({ email: 'late@example.com', first_name: 'Late' })
    const answer = new Promise<number>((resolve, reject) => {
      const req = request(`${base}/api/v1/contacts`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      })
      req.on('response', (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.write(body.slice(0, 10))
      setTimeout(() => {
        const exited = new Promise<number | null>((done) => server.once('exit', (code) => done(code)))
        server.kill('SIGTERM')
        setTimeout(() => req.end(body.slice(10)), 200)
        exitCode = exited
      }, 100)
    })
    let exitCode: Promise<number | null> = Promise.resolve(null)
    expect(await answer).toBe(201)
    expect(await exitCode).toBe(0)
    expect(stdout).toContain('"msg":"shutting down"')
    // The request log's entries still waiting at the signal were written in the drain: all of them,
    // the POST answered after the signal too (docs/request-log.md).
    const database = openDatabase({ kind: 'sqlite', path: path.join(dir, 'contacts.sqlite'), synchronous: 'NORMAL' })
    try {
      const { rows } = await listRequestLogRows(database.db, accountId, { afterId: undefined, fetch: 100 })
      const logged = rows.map((row) => JSON.parse(row.body) as RequestLog).reverse()
      expect(logged.map(({ method, path, status }) => [method, path, status])).toEqual([
        ['GET', '/api/v1/me', 200],
        ['POST', '/api/v1/contacts', 201],
        ['POST', '/api/v1/contacts', 201],
      ])
    } finally {
      await database.close()
    }
  })
})

describe.each(testDialects().filter((dialect) => dialect !== 'pglite'))(
  'serve on %s with its port taken',
  (dialect) => {
    it('exits 1 at once with the reason, instead of hanging on its open connections', async () => {
      const taken = createServer()
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
      const { port } = taken.address() as AddressInfo
      const dir = mkdtempSync(path.join(tmpdir(), 'contacts-port-'))
      const schema = dialect === 'postgres' ? await createThrowawaySchema('port') : undefined
      try {
        const child = spawn(process.execPath, [...cliCommand(), 'serve'], {
          env: {
            ...process.env,
            PORT: String(port),
            ...(schema?.env ?? { DATABASE_URL: `sqlite:${path.join(dir, 'contacts.sqlite')}` }),
            SECRET: 'port-test-secret-0123456789abcdef0123456789',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let stderr = ''
        child.stderr?.on('data', (chunk) => {
          stderr += chunk
        })
        const code = await new Promise<number | null>((resolve) => {
          const timer = setTimeout(() => {
            child.kill('SIGKILL')
            resolve(null)
          }, 10_000)
          child.once('exit', (exitCode) => {
            clearTimeout(timer)
            resolve(exitCode)
          })
        })
        expect(code, stderr).toBe(1)
        expect(stderr).toContain('EADDRINUSE')
      } finally {
        taken.close()
        rmSync(dir, { recursive: true, force: true })
        await schema?.drop()
      }
    })
  },
)
