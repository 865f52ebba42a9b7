// In a real browser: sign up, add a webhook endpoint in Settings → API & Webhooks, see its signing
// secret once (a reload does not show it again), send a test event, read the delivery.
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { staticResolver } from '../static-resolver.js'
import { browserAvailable, type E2E, SCREENSHOTS, signUpInBrowser, startE2E } from './browser.js'

const HOOK_URL = 'https://hooks.example.com/crm'

describe.skipIf(!browserAvailable())('webhooks in Chromium', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E({ resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'] }) })
  }, 60_000)
  afterAll(() => e?.close())

  it('add an endpoint → secret shown once → test event → the endpoint page lists the delivery', async () => {
    const context = await e.browser.newContext()
    const page = await context.newPage()
    const accountId = await signUpInBrowser(page, e.base, 'e2e-hooks@example.com', 'Hooks Co')
    await page.goto(`${e.base}/app/${accountId}/settings/api`)
    await page.getByRole('navigation', { name: 'API & Webhooks' }).getByRole('link', { name: 'Webhooks' }).click()
    await page.getByRole('link', { name: 'Add endpoint' }).click()
    await page.getByLabel('Endpoint URL').fill(HOOK_URL)
    await page.getByLabel('All events').uncheck()
    await page.getByLabel('contact.created').check()
    await page.getByLabel('contact.updated').check()
    await page.getByLabel('Description').fill('CRM sync')
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhook-add.png'), fullPage: true })
    await page.getByRole('button', { name: 'Add endpoint' }).click()

    await page.getByText('shown only this once').waitFor()
    const secret = await page.getByLabel('Signing secret').inputValue()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(await page.getByRole('button', { name: 'Copy' }).isVisible()).toBe(true)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhook-secret.png'), fullPage: true })
    // Reached by a redirect: a reload shows it no more, and creates nothing.
    await page.reload()
    await page.getByRole('heading', { name: 'Secret already shown' }).waitFor()
    expect(await page.content()).not.toContain(secret)
    expect(
      await e.t.db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', accountId).execute(),
    ).toHaveLength(1)

    await page.getByRole('link', { name: 'Go to the endpoint' }).click()
    await page.getByRole('button', { name: 'Send test event' }).click()
    await page.getByText('A webhook.test event is queued').waitFor()
    const row = page.locator('tr', { hasText: 'webhook.test' })
    expect(await row.getByText('pending').isVisible()).toBe(true)
    await page.getByRole('button', { name: 'Reveal signing secret' }).click()
    expect(await page.getByLabel('Signing secret').inputValue()).toBe(secret)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhook-endpoint.png'), fullPage: true })

    await page.locator('tr', { hasText: 'webhook.test' }).getByRole('link', { name: 'Details' }).click()
    await page.getByRole('heading', { name: /^Delivery wd_/ }).waitFor()
    expect(await page.getByText('"type":"webhook.test"').isVisible()).toBe(true)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhook-delivery.png'), fullPage: true })

    await page.goto(`${e.base}/app/${accountId}/settings/api/webhooks`)
    const endpoint = page.locator('tr', { hasText: HOOK_URL })
    expect(await endpoint.getByText('contact.created, contact.updated').isVisible()).toBe(true)
    expect(await endpoint.getByText('enabled').isVisible()).toBe(true)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhooks-settings.png'), fullPage: true })
    await context.close()
  })
})
