// In a real browser: a page on another port of the app's host (same-site, so SameSite=Lax cookies
// go with its posts) submits a form to the app. Even with a valid CSRF token, as if it had leaked,
// the same-origin check refuses it and the person stays signed in.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browserAvailable, type E2E, signUpInBrowser, startE2E } from './browser.js'

describe.skipIf(!browserAvailable())('cross-origin posts in Chromium', () => {
  let e: E2E
  let attacker: Server
  let attackerPage = ''
  let attackerBase = ''
  beforeAll(async () => {
    e = await startE2E()
    attacker = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      response.end(attackerPage)
    })
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve))
    attackerBase = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`
  }, 60_000)
  afterAll(async () => {
    await new Promise((resolve) => attacker?.close(resolve))
    await e?.close()
  })

  it('a form posted from another port of the same host is refused, even with a leaked token', async () => {
    const context = await e.browser.newContext()
    const page = await context.newPage()
    const accountId = await signUpInBrowser(page, e.base, 'e2e-cross@example.com', 'Cross Co')
    const token = await page.locator('input[name="_csrf"]').first().inputValue()
    expect(token).not.toBe('')

    attackerPage = `<!doctype html><form method="post" action="${e.base}/sign-out">
<input type="hidden" name="_csrf" value="${token}"></form>
<script>document.forms[0].submit()</script>`
    await page.goto(attackerBase)
    // Refused, the browser stays on the post's answer; taken, it would follow the redirect to /sign-in.
    await page.waitForURL(/\/sign-(out|in)$/)
    expect(page.url()).toBe(`${e.base}/sign-out`)
    expect(await page.getByRole('heading', { name: 'Refused' }).isVisible()).toBe(true)
    expect(await page.content()).toContain('sent from another site')

    // Still signed in: the account's page opens.
    await page.goto(`${e.base}/app/${accountId}/settings/api`)
    expect(page.url()).toBe(`${e.base}/app/${accountId}/settings/api`)
    // And the same form from the app's own page signs out.
    await page.getByRole('banner').getByText('e2e-cross@example.com').click()
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(`${e.base}/sign-in`)
    await context.close()
  })
})
