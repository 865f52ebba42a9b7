// Conditional requests on contacts (docs/conditional-requests.md): ETag, If-None-Match → 304,
// If-Match → 412, atomic with the write; through HTTP on every dialect.
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem, listVersionSettled, snapshotAccount } from '../../test/helpers.js'
import { purgeExpiredEvents } from '../events/events.store.js'

const STRONG_TAG = /^"[\w-]{22}"$/

const etagOf = (res: LightMyRequestResponse): string => {
  const tag = res.headers.etag
  expect(tag, `${res.statusCode} ${res.body}`).toMatch(STRONG_TAG)
  return tag as string
}

/** A 304 as RFC 9110 §15.4.5 has it: no body, the ETag, and the headers a 200 would carry. */
function expectNotModified(res: LightMyRequestResponse, tag: string) {
  expect(res.statusCode, res.body).toBe(304)
  expect(res.body).toBe('')
  expect(res.headers.etag).toBe(tag)
  expect(res.headers['content-type']).toBeUndefined()
  expect(res.headers['cache-control']).toBe('no-store')
  expect(res.headers['request-id']).toMatch(/^req_/)
}

describe.each(testDialects())('conditional requests on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const get = (account: TestAccount, url: string, headers: Record<string, string> = {}) =>
    t.inject(account, { method: 'GET', url, headers })
  const patch = (account: TestAccount, id: string, payload: object, headers: Record<string, string> = {}) =>
    t.inject(account, { method: 'PATCH', url: `/api/v1/contacts/${id}`, payload, headers })
  const remove = (account: TestAccount, id: string, headers: Record<string, string> = {}) =>
    t.inject(account, { method: 'DELETE', url: `/api/v1/contacts/${id}`, headers })

  const settled = (account: TestAccount) => listVersionSettled(t, account)

  describe('GET /contacts/{id}', () => {
    it('has a strong ETag, the same as the write that made the contact; If-None-Match with it is 304 until it changes', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'a@x.io' } })
      const tag = etagOf(created)
      const url = `/api/v1/contacts/${created.json().id}`
      const read = await get(acme, url)
      expect(read.statusCode).toBe(200)
      expect(etagOf(read)).toBe(tag)
      expect(read.body).toBe(created.body)

      expectNotModified(await get(acme, url, { 'if-none-match': tag }), tag)
      // Weak comparison (RFC 9110 §13.1.2): W/ matches too; any tag of a list; `*`.
      expectNotModified(await get(acme, url, { 'if-none-match': `W/${tag}` }), tag)
      expectNotModified(await get(acme, url, { 'if-none-match': `"other", ${tag}` }), tag)
      expectNotModified(await get(acme, url, { 'if-none-match': '*' }), tag)
      expectNotModified(await t.inject(acme, { method: 'HEAD', url, headers: { 'if-none-match': tag } }), tag)
      const other = await get(acme, url, { 'if-none-match': '"0000000000000000000000"' })
      expect(other.statusCode).toBe(200)
      expect(other.body).toBe(created.body)

      const updated = await patch(acme, created.json().id, { first_name: 'Ada' })
      const newTag = etagOf(updated)
      expect(newTag).not.toBe(tag)
      const after = await get(acme, url, { 'if-none-match': tag })
      expect(after.statusCode).toBe(200)
      expect(etagOf(after)).toBe(newTag)
      expect(after.json().first_name).toBe('Ada')
    })

    it('If-Match on a read: 412 when it does not match, the contact when it does', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'b@x.io' } })
      const url = `/api/v1/contacts/${created.json().id}`
      expectProblem(await get(acme, url, { 'if-match': '"0000000000000000000000"' }), 412, 'precondition_failed')
      expect((await get(acme, url, { 'if-match': etagOf(created) })).statusCode).toBe(200)
    })

    it('a 304 reports the rate limit like any answer, and spends a request', async () => {
      const limited = await createTestHarness({ dialect, env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '50' } })
      try {
        const acme = await limited.createAccount()
        const created = await limited.inject(acme, {
          method: 'POST',
          url: '/api/v1/contacts',
          payload: { phone: '+12025550143' },
        })
        const url = `/api/v1/contacts/${created.json().id}`
        const first = await limited.inject(acme, { method: 'GET', url, headers: { 'if-none-match': etagOf(created) } })
        const second = await limited.inject(acme, { method: 'GET', url, headers: { 'if-none-match': etagOf(created) } })
        expectNotModified(second, etagOf(created))
        expect(second.headers['ratelimit-policy']).toBe('"account";q=50;w=50')
        const left = (res: LightMyRequestResponse) => Number(/;r=(\d+)/.exec(String(res.headers.ratelimit))?.[1])
        expect(left(second)).toBe(left(first) - 1)
      } finally {
        await limited.close()
      }
    })
  })

  describe('If-Match on PATCH and DELETE', () => {
    it('PATCH with the current ETag changes the contact; with a stale one it is 412 and changes nothing', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'c@x.io' } })
      const { id } = created.json()
      const first = await patch(acme, id, { first_name: 'Grace' }, { 'if-match': etagOf(created) })
      expect(first.statusCode, first.body).toBe(200)
      expect(etagOf(first)).toBe(etagOf(await get(acme, `/api/v1/contacts/${id}`)))

      const before = await snapshotAccount(t, acme)
      const stale = await patch(acme, id, { first_name: 'Lost' }, { 'if-match': etagOf(created) })
      expectProblem(stale, 412, 'precondition_failed')
      expect(stale.headers.etag).toBeUndefined()
      // Strong comparison: the weak form of the current tag does not match either.
      expectProblem(
        await patch(acme, id, { first_name: 'Lost' }, { 'if-match': `W/${etagOf(first)}` }),
        412,
        'precondition_failed',
      )
      expect(await snapshotAccount(t, acme)).toEqual(before)

      expect(
        (await patch(acme, id, { last_name: 'Hopper' }, { 'if-match': `"stale", ${etagOf(first)}` })).statusCode,
      ).toBe(200)
      expect((await patch(acme, id, { job_title: 'Admiral' }, { 'if-match': '*' })).statusCode).toBe(200)
    })

    it('If-None-Match on PATCH: * or the current tag is 412 (RFC 9110 §13.1.2), another tag goes ahead', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'd@x.io' } })
      const { id } = created.json()
      const before = await snapshotAccount(t, acme)
      expectProblem(await patch(acme, id, { first_name: 'X' }, { 'if-none-match': '*' }), 412, 'precondition_failed')
      expectProblem(
        await patch(acme, id, { first_name: 'X' }, { 'if-none-match': etagOf(created) }),
        412,
        'precondition_failed',
      )
      expect(await snapshotAccount(t, acme)).toEqual(before)
      expect(
        (await patch(acme, id, { first_name: 'X' }, { 'if-none-match': '"0000000000000000000000"' })).statusCode,
      ).toBe(200)
    })

    it('DELETE with a stale ETag is 412 and keeps the contact; with the current one it deletes', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'e@x.io' } })
      const { id } = created.json()
      const changed = await patch(acme, id, { first_name: 'Changed' })
      const before = await snapshotAccount(t, acme)
      expectProblem(await remove(acme, id, { 'if-match': etagOf(created) }), 412, 'precondition_failed')
      expect(await snapshotAccount(t, acme)).toEqual(before)
      const deleted = await remove(acme, id, { 'if-match': etagOf(changed) })
      expect(deleted.statusCode).toBe(204)
      expect((await get(acme, `/api/v1/contacts/${id}`)).statusCode).toBe(404)
    })

    it('a missing contact or another account’s is 404, never 412 or 304: conditions say nothing about other accounts', async () => {
      const [alice, bob] = [await t.createAccount('Alice'), await t.createAccount('Bob')]
      const created = await t.inject(alice, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'f@x.io' } })
      const { id } = created.json()
      const tag = etagOf(created)
      const before = await snapshotAccount(t, alice)
      const conditions: Record<string, string>[] = [
        { 'if-match': tag },
        { 'if-match': '"0000000000000000000000"' },
        { 'if-none-match': '*' },
      ]
      for (const headers of conditions) {
        expectProblem(await patch(bob, id, { first_name: 'Mallory' }, headers), 404, 'not_found')
        expectProblem(await remove(bob, id, headers), 404, 'not_found')
        expectProblem(
          await patch(alice, 'con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A', { first_name: 'X' }, headers),
          404,
          'not_found',
        )
      }
      // The right tag of another account's contact is still a 404, not a 304 that would confirm it exists.
      expectProblem(await get(bob, `/api/v1/contacts/${id}`, { 'if-none-match': tag }), 404, 'not_found')
      expectProblem(await get(bob, `/api/v1/contacts/${id}`, { 'if-match': tag }), 404, 'not_found')
      expect(await snapshotAccount(t, alice)).toEqual(before)
      // …while its owner's conditions hold.
      expectNotModified(await get(alice, `/api/v1/contacts/${id}`, { 'if-none-match': tag }), tag)
    })

    it('concurrent PATCHes with the same If-Match: exactly one lands, the others are 412 (no lost update)', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'g@x.io' } })
      const { id } = created.json()
      const tag = etagOf(created)
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => patch(acme, id, { first_name: `Writer ${i}` }, { 'if-match': tag })),
      )
      const winners = results.filter((res) => res.statusCode === 200)
      expect(results.map((res) => res.statusCode).sort()).toEqual([200, 412, 412, 412, 412, 412, 412, 412])
      for (const res of results.filter((r) => r.statusCode !== 200)) {
        expectProblem(res, 412, 'precondition_failed')
      }
      const stored = (await get(acme, `/api/v1/contacts/${id}`)).json()
      expect(stored.first_name).toBe(winners[0]?.json().first_name)
      const updates = await t.db
        .selectFrom('events')
        .select('id')
        .where('account_id', '=', acme.id)
        .where('type', '=', 'contact.updated')
        .execute()
      expect(updates).toHaveLength(1)
    })

    it('a DELETE racing PATCHes with the same If-Match: one of them wins, the rest are 412', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'h@x.io' } })
      const { id } = created.json()
      const tag = etagOf(created)
      const results = await Promise.all([
        patch(acme, id, { first_name: 'One' }, { 'if-match': tag }),
        remove(acme, id, { 'if-match': tag }),
        patch(acme, id, { first_name: 'Two' }, { 'if-match': tag }),
      ])
      const statuses = results.map((res) => res.statusCode)
      expect(statuses.filter((status) => status === 200 || status === 204)).toHaveLength(1)
      // A PATCH after the DELETE finds no contact (404), before it fails the tag (412).
      expect(statuses.every((status) => [200, 204, 404, 412].includes(status))).toBe(true)
    })
  })

  describe('list pages', () => {
    it('a page has an ETag; If-None-Match with it is 304 until any contact of the account changes', async () => {
      const acme = await t.createAccount()
      const ada = await createContact(t, acme, { email: 'ada@x.io' })
      await createContact(t, acme, { email: 'bob@x.io' })
      await settled(acme)
      const page = await get(acme, '/api/v1/contacts?limit=1')
      const tag = etagOf(page)
      expect(page.json().contacts).toHaveLength(1)
      expectNotModified(await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': tag }), tag)
      expectNotModified(await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': `"x", W/${tag}` }), tag)
      expectNotModified(
        await t.inject(acme, { method: 'HEAD', url: '/api/v1/contacts?limit=1', headers: { 'if-none-match': tag } }),
        tag,
      )
      // Another query (its page, and the cursor it carries, differ) has another tag.
      for (const url of ['/api/v1/contacts', '/api/v1/contacts?limit=2', '/api/v1/contacts?limit=1&order=desc']) {
        const other = await get(acme, url, { 'if-none-match': tag })
        expect(other.statusCode, url).toBe(200)
        expect(etagOf(other)).not.toBe(tag)
      }

      await patch(acme, ada.id, { first_name: 'Ada' })
      await settled(acme)
      const changed = await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': tag })
      expect(changed.statusCode).toBe(200)
      expect(changed.json().contacts[0].first_name).toBe('Ada')
      const newTag = etagOf(changed)
      expect(newTag).not.toBe(tag)
      expectNotModified(await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': newTag }), newTag)

      // A deletion and a creation change the tag too, whatever page they are on.
      const carl = await createContact(t, acme, { email: 'carl@x.io' })
      await settled(acme)
      const afterCreate = await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': newTag })
      expect(afterCreate.statusCode).toBe(200)
      await remove(acme, carl.id)
      await settled(acme)
      expect((await get(acme, '/api/v1/contacts?limit=1', { 'if-none-match': etagOf(afterCreate) })).statusCode).toBe(
        200,
      )
    })

    it('tags are per account: another account’s changes leave the page alone, and its tags never match here', async () => {
      const [alice, bob] = [await t.createAccount('Alice'), await t.createAccount('Bob')]
      await createContact(t, alice, { email: 'a@alice.io' })
      await createContact(t, bob, { email: 'b@bob.io' })
      await settled(alice)
      await settled(bob)
      const alicePage = await get(alice, '/api/v1/contacts')
      const bobPage = await get(bob, '/api/v1/contacts')
      expect(etagOf(alicePage)).not.toBe(etagOf(bobPage))
      expect((await get(alice, '/api/v1/contacts', { 'if-none-match': etagOf(bobPage) })).statusCode).toBe(200)
      await createContact(t, bob, { email: 'b2@bob.io' })
      await settled(alice)
      await settled(bob)
      expectNotModified(await get(alice, '/api/v1/contacts', { 'if-none-match': etagOf(alicePage) }), etagOf(alicePage))
    })

    it('pages of an account without events (all purged) are tagged by their bytes: still 304 while unchanged', async () => {
      const acme = await t.createAccount()
      const ada = await createContact(t, acme, { email: 'ada@x.io' })
      await purgeExpiredEvents(t.db, new Date(Date.now() + 365 * 86_400_000), 30)
      const page = await get(acme, '/api/v1/contacts')
      const tag = etagOf(page)
      expectNotModified(await get(acme, '/api/v1/contacts', { 'if-none-match': tag }), tag)
      await patch(acme, ada.id, { first_name: 'Ada' })
      await settled(acme)
      expect((await get(acme, '/api/v1/contacts', { 'if-none-match': tag })).statusCode).toBe(200)
    })

    it('a bad cursor is 400 invalid_cursor, without an ETag, whatever If-None-Match says', async () => {
      const acme = await t.createAccount()
      await createContact(t, acme, { email: 'ada@x.io' })
      for (const condition of ['"0000000000000000000000"', '*']) {
        const res = await get(acme, '/api/v1/contacts?after=garbage', { 'if-none-match': condition })
        expectProblem(res, 400, 'invalid_cursor')
        expect(res.headers.etag).toBeUndefined()
      }
    })
  })

  describe('malformed and unsupported conditions', () => {
    it('an If-Match or If-None-Match that is not * or quoted tags is 400 naming the header, and changes nothing', async () => {
      const acme = await t.createAccount()
      const created = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'm@x.io' } })
      const { id } = created.json()
      const bare = etagOf(created).slice(1, -1)
      const before = await snapshotAccount(t, acme)
      for (const [header, value] of [
        ['if-match', bare],
        ['if-match', `${etagOf(created)}, *`],
        ['if-none-match', `"${bare}`],
        ['if-none-match', 'W/ "x"'],
      ] as const) {
        const res = await patch(acme, id, { first_name: 'X' }, { [header]: value })
        const body = expectProblem(res, 400, 'invalid_parameter')
        expect(body.errors[0].field).toBe(header === 'if-match' ? 'If-Match' : 'If-None-Match')
      }
      const read = expectProblem(
        await get(acme, `/api/v1/contacts/${id}`, { 'if-none-match': bare }),
        400,
        'invalid_parameter',
      )
      expect(read.errors[0].field).toBe('If-None-Match')
      expectProblem(await get(acme, '/api/v1/contacts', { 'if-none-match': bare }), 400, 'invalid_parameter')
      expectProblem(
        await get(acme, '/api/v1/contacts', { 'if-none-match': `"${'a'.repeat(3000)}"` }),
        400,
        'invalid_parameter',
      )
      expect(await snapshotAccount(t, acme)).toEqual(before)
      // An empty header is an empty list: no condition.
      expect((await get(acme, `/api/v1/contacts/${id}`, { 'if-none-match': '' })).statusCode).toBe(200)
    })

    it('a write that evaluates no conditions refuses them (400) instead of ignoring them, and does nothing', async () => {
      const acme = await t.createAccount()
      const before = await snapshotAccount(t, acme)
      const create = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'n@x.io' },
        headers: { 'if-match': '*', 'idempotency-key': 'conditional-create' },
      })
      expect(expectProblem(create, 400, 'invalid_parameter').errors[0].field).toBe('If-Match')
      const upsert = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts/upsert',
        payload: { email: 'n@x.io' },
        headers: { 'if-none-match': '*' },
      })
      expect(expectProblem(upsert, 400, 'invalid_parameter').errors[0].field).toBe('If-None-Match')
      const endpoint = await t.inject(acme, {
        method: 'PATCH',
        url: '/api/v1/webhook_endpoints/we_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A',
        payload: { description: 'x' },
        headers: { 'if-match': '"0000000000000000000000"' },
      })
      expectProblem(endpoint, 400, 'invalid_parameter')
      expect(await snapshotAccount(t, acme)).toEqual(before)
      // The refused request claimed no Idempotency-Key: the same key, without the condition, creates.
      const retried = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'n@x.io' },
        headers: { 'idempotency-key': 'conditional-create' },
      })
      expect(retried.statusCode).toBe(201)
      expect(retried.headers['idempotent-replayed']).toBeUndefined()
    })
  })

  it('an Idempotency-Key replay carries the ETag of the body it replays, which If-Match then refuses once changed', async () => {
    const acme = await t.createAccount()
    const send = () =>
      t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'r@x.io' },
        headers: { 'idempotency-key': 'replayed-etag' },
      })
    const first = await send()
    const { id } = first.json()
    await patch(acme, id, { first_name: 'Changed' })
    const replay = await send()
    expect(replay.headers['idempotent-replayed']).toBe('true')
    expect(replay.body).toBe(first.body)
    expect(etagOf(replay)).toBe(etagOf(first))
    expectProblem(
      await patch(acme, id, { first_name: 'Lost' }, { 'if-match': etagOf(replay) }),
      412,
      'precondition_failed',
    )
  })

  it('documents ETag, If-None-Match, If-Match, 304 and 412 in the OpenAPI document', async () => {
    const doc = (await t.inject(null, { method: 'GET', url: '/api/v1/openapi.json' })).json()
    const operation = (path: string, method: string) => doc.paths[path][method]
    const headerNames = (op: { parameters: Array<{ in: string; name: string }> }) =>
      op.parameters.filter((p) => p.in === 'header').map((p) => p.name)
    for (const [path, method] of [
      ['/api/v1/contacts', 'get'],
      ['/api/v1/contacts/{id}', 'get'],
    ]) {
      const op = operation(path as string, method as string)
      expect(headerNames(op)).toEqual(expect.arrayContaining(['If-None-Match', 'If-Match']))
      expect(op.responses['304'].headers.ETag).toEqual({ $ref: '#/components/headers/ETag' })
      expect(op.responses['200'].headers.ETag).toEqual({ $ref: '#/components/headers/ETag' })
    }
    for (const method of ['patch', 'delete']) {
      const op = operation('/api/v1/contacts/{id}', method)
      expect(headerNames(op)).toEqual(expect.arrayContaining(['If-Match', 'If-None-Match']))
      expect(op.responses['412'].content['application/problem+json'].examples.precondition_failed).toBeDefined()
    }
    expect(operation('/api/v1/contacts', 'post').responses['201'].headers.ETag).toBeDefined()
    expect(operation('/api/v1/contacts/{id}', 'patch').responses['200'].headers.ETag).toBeDefined()
  })
})
