// Test mode in Chromium at desktop and phone widths, as a person uses it (roles and labels): the
// header's switch, the banner on every test page, a test key, a test contact that live mode does
// not show, and "Delete all test data" with its confirmation. Each page is checked for layout and
// axe-core violations (page-checks.ts).
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browserAvailable, type E2E, signUpInBrowser, startE2E } from './browser.js'
import { checkPage, VIEWPORTS, type Viewport } from './page-checks.js'

/** A test page at phone width is the live one plus its banner: its picture is left out of the docs. */
const desktopOnly = (viewport: Viewport) => viewport.name === 'desktop'

describe.skipIf(!browserAvailable())('test mode in Chromium', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E()
  }, 60_000)
  afterAll(() => e?.close())

  const modeSwitch = (page: Page) => page.getByRole('switch', { name: 'Test mode' })

  for (const viewport of VIEWPORTS) {
    it(`at ${viewport.width} px`, async () => {
      const context = await e.browser.newContext({ viewport: { width: viewport.width, height: viewport.height } })
      const page = await context.newPage()
      const accountId = await signUpInBrowser(page, e.base, `test-mode-${viewport.name}@example.com`, 'Sandbox Co')

      expect(await modeSwitch(page).getAttribute('aria-checked')).toBe('false')
      expect(await page.getByRole('note').count()).toBe(0)
      await modeSwitch(page).click()
      await page.waitForURL(`${e.base}/app/${accountId}/test/contacts`)
      expect(await modeSwitch(page).getAttribute('aria-checked')).toBe('true')
      expect(await page.getByRole('note').textContent()).toContain('Test mode.')
      await checkPage(page, viewport, 'test-mode-contacts', desktopOnly(viewport))

      // A key of test mode, from Settings in test mode.
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Settings' }).click()
      await page.getByLabel('Name').fill('Sandbox')
      await page.getByRole('button', { name: 'Create key' }).click()
      await page.getByText('shown only this once').waitFor()
      expect(await page.getByRole('note').textContent()).toContain('Test mode.')
      const key = await page.getByLabel('API key').inputValue()
      expect(key).toMatch(/^service_test_/)
      await page.getByRole('link', { name: /back to API keys/ }).click()
      await checkPage(page, viewport, 'test-mode-api-keys', desktopOnly(viewport))

      const created = await fetch(`${e.base}/api/v1/contacts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'sandy@example.com', first_name: 'Sandy' }),
      })
      expect(created.status).toBe(201)
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Contacts' }).click()
      // Counted and looked at once the page has loaded, not while it is still the page before.
      await page.waitForURL(`${e.base}/app/${accountId}/test/contacts`)
      expect(await page.getByRole('link', { name: 'Sandy' }).isVisible()).toBe(true)

      // Live mode does not show it, nor the test key.
      await modeSwitch(page).click()
      await page.waitForURL(`${e.base}/app/${accountId}/contacts`)
      expect(await page.getByRole('link', { name: 'Sandy' }).count()).toBe(0)
      await page.goto(`${e.base}/app/${accountId}/settings/api`)
      expect(await page.getByRole('row', { name: /Sandbox/ }).count()).toBe(0)

      // Delete all test data: asked, confirmed, done in the background.
      await modeSwitch(page).click()
      await page.waitForURL(`${e.base}/app/${accountId}/test/settings/api`)
      await page.getByRole('link', { name: 'Delete all test data…' }).click()
      await checkPage(page, viewport, 'test-mode-delete-confirm', desktopOnly(viewport))
      await page.getByRole('button', { name: 'Delete all test data' }).click()
      await page.getByText('All test data is being deleted').first().waitFor()
      await e.t.deps.testData.drain()
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Contacts' }).click()
      await page.waitForURL(`${e.base}/app/${accountId}/test/contacts`)
      expect(await page.getByRole('link', { name: 'Sandy' }).count()).toBe(0)
      await checkPage(page, viewport, 'test-mode-contacts-empty', false)
      await context.close()
    }, 120_000)
  }
})
