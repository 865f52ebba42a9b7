// A browser-like client over app.inject: keeps cookies, reads the CSRF token from the last page.
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'

export interface WebClient {
  cookies: Map<string, string>
  get(url: string): Promise<LightMyRequestResponse>
  /** Posts a urlencoded form; `_csrf` is taken from the last page unless given. */
  /** A repeated field (checkboxes) is a list. */
  post(url: string, fields: Record<string, string | string[]>): Promise<LightMyRequestResponse>
  /** Opens the account's import form (for its token), then uploads `content` as the file, as a browser does. */
  uploadCsv(accountId: string, content: string | Buffer, filename?: string): Promise<LightMyRequestResponse>
  csrf(): string
}

export function webClient(app: FastifyInstance): WebClient {
  const cookies = new Map<string, string>()
  let lastBody = ''
  const cookieHeader = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) {
      if (
        c.value === '' ||
        (c.maxAge !== undefined && c.maxAge <= 0) ||
        (c.expires && c.expires.getTime() < Date.now())
      ) {
        cookies.delete(c.name)
      } else {
        cookies.set(c.name, c.value)
      }
    }
    if (res.headers['content-type']?.toString().startsWith('text/html')) {
      lastBody = res.body
    }
    return res
  }
  const client: WebClient = {
    cookies,
    async get(url) {
      return remember(await app.inject({ method: 'GET', url, headers: { cookie: cookieHeader() } }))
    },
    async post(url, fields) {
      const body = new URLSearchParams([
        ['_csrf', client.csrf()],
        ...Object.entries(fields).flatMap(([name, value]) =>
          (Array.isArray(value) ? value : [value]).map((item): [string, string] => [name, item]),
        ),
      ]).toString()
      return remember(
        await app.inject({
          method: 'POST',
          url,
          headers: { cookie: cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
          payload: body,
        }),
      )
    },
    async uploadCsv(accountId, content, filename = 'a.csv') {
      const form = `/app/${accountId}/contacts/import`
      await client.get(form)
      const body = multipart([
        { name: '_csrf', value: client.csrf() },
        { name: 'file', filename, content },
      ])
      return remember(
        await app.inject({
          method: 'POST',
          url: form,
          payload: body.payload,
          headers: { ...body.headers, cookie: cookieHeader() },
        }),
      )
    },
    csrf() {
      return /name="_csrf" value="([^"]*)"/.exec(lastBody)?.[1] ?? ''
    },
  }
  return client
}

/** Signs up a new person with their first account; returns the client (signed in) and the account id. */
export async function signUp(app: FastifyInstance, email: string, accountName = 'Acme') {
  const client = webClient(app)
  await client.get('/sign-up')
  const res = await client.post('/sign-up', { email, password: 'correct-horse-battery', account_name: accountName })
  if (res.statusCode !== 303) {
    throw new Error(`sign-up failed: ${res.statusCode} ${res.body.slice(0, 300)}`)
  }
  const accountId = /\/app\/(acct_[0-9A-Z]+)\//.exec(String(res.headers.location))?.[1] ?? ''
  return { client, accountId }
}

/** The full key shown on a key-created page. */
export const shownKey = (body: string): string | undefined =>
  /value="([a-z0-9]+_(?:live|test)_[A-Za-z0-9]{32})"/.exec(body)?.[1]

/**
 * Makes `member` (signed in as `email`) a member of the owner's account as the web app does: the
 * owner invites the email, the member opens the link and accepts. Returns the accept response.
 */
export async function inviteAndAccept(
  owner: { client: WebClient; accountId: string },
  member: WebClient,
  email: string,
  role: 'admin' | 'member' = 'member',
): Promise<LightMyRequestResponse> {
  await owner.client.get(`/app/${owner.accountId}/settings/members`)
  const invited = await owner.client.post(`/app/${owner.accountId}/settings/members`, { email, role })
  if (invited.statusCode !== 303) {
    throw new Error(`invitation failed: ${invited.statusCode} ${invited.body.slice(0, 300)}`)
  }
  const shown = await owner.client.get(String(invited.headers.location))
  const link = /id="invitation-link" type="text" readonly value="([^"]+)"/.exec(shown.body)?.[1]
  if (!link) {
    throw new Error('no invitation link shown')
  }
  const path = new URL(link).pathname
  await member.get(path)
  return member.post(`${path}/accept`, {})
}

/** One part of a multipart/form-data body: a text field, or a file. */
export type Part = { name: string; value: string } | { name: string; filename: string; content: string | Buffer }

/** A multipart/form-data body built by hand, as a browser sends it (files as text/csv). */
export function multipart(parts: Part[]): { payload: Buffer; headers: Record<string, string> } {
  const boundary = '----contactsTestBoundary7MA4YWxkTrZu0gW'
  const chunks: Buffer[] = []
  for (const part of parts) {
    if ('filename' in part) {
      chunks.push(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: text/csv\r\n\r\n`,
        ),
        Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content),
        Buffer.from('\r\n'),
      )
    } else {
      chunks.push(
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`),
      )
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return {
    payload: Buffer.concat(chunks),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  }
}

export interface HttpAnswer {
  status: number
  body: string
  location: string | null
  refresh: string | null
}

/**
 * The browser stand-in of webClient, over fetch to a real port (a server process): keeps cookies,
 * takes the CSRF token from the last HTML page, posts forms and uploads files.
 */
export function httpWebClient(base: string) {
  const cookies = new Map<string, string>()
  let lastPage = ''
  const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  const keep = async (res: Response): Promise<HttpAnswer> => {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';')
      const [name = '', value = ''] = pair.split('=')
      cookies.set(name, value)
    }
    const body = await res.text()
    if ((res.headers.get('content-type') ?? '').startsWith('text/html')) {
      lastPage = body
    }
    return { status: res.status, body, location: res.headers.get('location'), refresh: res.headers.get('refresh') }
  }
  const csrf = () => /name="_csrf" value="([^"]*)"/.exec(lastPage)?.[1] ?? ''
  const send = async (path: string, init: RequestInit) =>
    keep(await fetch(base + path, { ...init, headers: { cookie: cookie(), ...init.headers }, redirect: 'manual' }))
  return {
    /** The session's Cookie header, for a request made without this client (a streamed body). */
    cookie,
    get: (path: string) => send(path, {}),
    post: (path: string, fields: Record<string, string>) =>
      send(path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf(), ...fields }),
      }),
    upload: (path: string, filename: string, content: string) => {
      const form = new FormData()
      form.append('_csrf', csrf())
      form.append('file', new Blob([content], { type: 'text/csv' }), filename)
      return send(path, { method: 'POST', body: form })
    },
  }
}

/** signUp through a real port: a person signs up in the web app; their client, signed in, and the new account. */
export async function httpSignUp(base: string, email: string, accountName = 'Acme') {
  const web = httpWebClient(base)
  await web.get('/sign-up')
  const res = await web.post('/sign-up', { email, password: 'correct-horse-battery', account_name: accountName })
  const accountId = /\/app\/(acct_[0-9A-Z]+)\//.exec(res.location ?? '')?.[1]
  if (res.status !== 303 || !accountId) {
    throw new Error(`sign-up on ${base} failed: ${res.status} ${res.body.slice(0, 300)}`)
  }
  return { web, accountId }
}
