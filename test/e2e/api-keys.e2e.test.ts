// In a real browser: sign up, issue a key in Settings → API & Webhooks, use it on the API,
// revoke and roll it in the UI; another person cannot see the account.
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browserAvailable, type E2E, SCREENSHOTS, signUpInBrowser, startE2E } from './browser.js'

describe.skipIf(!browserAvailable())('API keys in Chromium', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E()
  }, 60_000)
  afterAll(() => e?.close())

  const me = (key: string) => fetch(`${e.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })

  async function createKeyInUi(page: import('playwright-core').Page, name: string): Promise<string> {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Settings' }).click()
    await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'API & Webhooks' }).click()
    await page.getByLabel('Name').fill(name)
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.getByText('shown only this once').waitFor()
    return page.locator('#new-key').inputValue()
  }

  it('sign up → create key → the key works → revoke in the UI → 401; reload never shows it again', async () => {
    const context = await e.browser.newContext()
    const page = await context.newPage()
    const accountId = await signUpInBrowser(page, e.base, 'e2e-owner@example.com', 'E2E Owner Co')
    const key = await createKeyInUi(page, 'Production')
    expect(key).toMatch(/^service_live_[A-Za-z0-9]{32}$/)
    // The copy button is shown by the page's script (hidden without it).
    expect(await page.getByRole('button', { name: 'Copy' }).isVisible()).toBe(true)

    const ok = await me(key)
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as { id: string }).id).toBe(accountId)

    await e.t.deps.keyVerifier.flush() // so the chart and "last used" show the request
    await page.getByRole('link', { name: /back to API keys/ }).click()
    await page.reload()
    expect(await page.content()).not.toContain(key)
    expect(await page.getByText(`service_live_…${key.slice(-4)}`).isVisible()).toBe(true)
    expect(await page.getByRole('img', { name: '1 request in the last 14 days' }).isVisible()).toBe(true)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'api-keys.png'), fullPage: true })

    await page.getByRole('link', { name: /^Revoke…/ }).click()
    await page.getByRole('button', { name: 'Revoke key' }).click()
    await page.getByText('The key was revoked.').waitFor()
    expect((await me(key)).status).toBe(401)
    await context.close()
  })

  it('roll with a 1 h overlap: both keys work; revoking the old one → 401, the new one still works', async () => {
    const context = await e.browser.newContext()
    const page = await context.newPage()
    await signUpInBrowser(page, e.base, 'e2e-roll@example.com', 'Roll Co')
    const oldKey = await createKeyInUi(page, 'Sync job')
    await page.getByRole('link', { name: /back to API keys/ }).click()

    await page
      .locator('tr', { hasText: `…${oldKey.slice(-4)}` })
      .getByRole('link', { name: /^Roll…/ })
      .click()
    await page.getByLabel('Old key expires').selectOption('1h')
    await page.getByRole('button', { name: 'Roll key' }).click()
    await page.getByText('shown only this once').waitFor()
    const newKey = await page.locator('#new-key').inputValue()
    expect(newKey).not.toBe(oldKey)
    expect((await me(oldKey)).status).toBe(200)
    expect((await me(newKey)).status).toBe(200)

    await page.getByRole('link', { name: /back to API keys/ }).click()
    await page
      .locator('tr', { hasText: `…${oldKey.slice(-4)}` })
      .getByRole('link', { name: /^Revoke…/ })
      .click()
    await page.getByRole('button', { name: 'Revoke key' }).click()
    await page.getByText('The key was revoked.').waitFor()
    expect((await me(oldKey)).status).toBe(401)
    expect((await me(newKey)).status).toBe(200)
    await context.close()
  })

  it("a second person cannot see the first person's account", async () => {
    const first = await e.browser.newContext()
    const firstPage = await first.newPage()
    const accountId = await signUpInBrowser(firstPage, e.base, 'e2e-first@example.com', 'First Private Co')
    const second = await e.browser.newContext()
    const page = await second.newPage()
    await signUpInBrowser(page, e.base, 'e2e-second@example.com', 'Second Co')
    for (const url of [`/app/${accountId}/settings/api`, `/app/${accountId}/contacts`]) {
      const response = await page.goto(`${e.base}${url}`)
      expect(response?.status()).toBe(404)
      expect(await page.content()).not.toContain('First Private Co')
    }
    await first.close()
    await second.close()
  })
})
