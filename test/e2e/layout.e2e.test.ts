// Every page of the web app, in Chromium at desktop (1280 px) and phone (390 px) widths, reached as a
// person reaches it (links, labels, buttons): no horizontal scrolling, every link, button and field
// inside the viewport, no serious or critical axe-core violation. SCREENSHOTS=1 also writes each
// page's screenshot to docs/screenshots/ (linked from docs/web-app.md).
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { staticResolver } from '../static-resolver.js'
import { browserAvailable, type E2E, signUpInBrowser, startE2E } from './browser.js'
import { checkPage, checkScreenshotsBudget, horizontalLayout, VIEWPORTS, type Viewport } from './page-checks.js'

const HOOK_URL = 'https://hooks.example.com/contacts/sync-with-a-long-path'

describe.skipIf(!browserAvailable())('every page at desktop and phone widths', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E({ resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'] }) })
  }, 60_000)
  afterAll(() => e?.close())

  const contexts: BrowserContext[] = []
  afterAll(async () => {
    for (const context of contexts) {
      await context.close()
    }
  })
  async function newPage(viewport: Viewport): Promise<Page> {
    const context = await e.browser.newContext({ viewport: { width: viewport.width, height: viewport.height } })
    contexts.push(context)
    return context.newPage()
  }

  /**
   * The header's menus open, one at a time: their entries must fit too. Opening one closes the
   * other, and Escape closes it.
   */
  async function checkMenus(page: Page, viewport: Viewport, name: string) {
    const account = page.locator('header details.account-menu')
    const person = page.locator('header details.user-menu')
    const isOpen = (menu: typeof account) => menu.evaluate((details) => (details as unknown as { open: boolean }).open)
    await account.locator('summary').click()
    await checkPage(page, viewport, `${name}-account-menu`)
    await person.locator('summary').click()
    expect(await isOpen(account)).toBe(false)
    await checkPage(page, viewport, `${name}-person-menu`)
    await page.keyboard.press('Escape')
    expect(await isOpen(person)).toBe(false)
  }

  afterAll(checkScreenshotsBudget)

  for (const viewport of VIEWPORTS) {
    it(`at ${viewport.width} px`, async () => {
      const owner = await newPage(viewport)
      const email = `owner-${viewport.name}@example.com`

      await owner.goto(`${e.base}/sign-in`)
      await checkPage(owner, viewport, 'sign-in')
      await owner.getByRole('link', { name: 'Create an account' }).click()
      await checkPage(owner, viewport, 'sign-up')
      const accountId = await signUpInBrowser(owner, e.base, email, 'Analytical Engines Research Ltd')
      await checkPage(owner, viewport, 'contacts-empty')
      await checkMenus(owner, viewport, 'contacts')

      // Settings → API & Webhooks: a key, used at once by the API.
      await owner.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Settings' }).click()
      await checkPage(owner, viewport, 'settings')
      await owner.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'API & Webhooks' }).click()
      await owner.getByLabel('Name').fill('Production server')
      await owner.getByRole('button', { name: 'Create key' }).click()
      await owner.getByText('shown only this once').waitFor()
      await checkPage(owner, viewport, 'key-created')
      const key = await owner.getByLabel('API key').inputValue()
      const api = (method: string, path: string, body?: unknown) =>
        fetch(`${e.base}/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        })
      await owner.getByRole('link', { name: /back to API keys/ }).click()

      // A webhook endpoint, a test event and a contact change: deliveries to list.
      await owner.getByRole('navigation', { name: 'API & Webhooks' }).getByRole('link', { name: 'Webhooks' }).click()
      await checkPage(owner, viewport, 'webhooks', false) // the endpoint pages below show its list
      await owner.getByRole('link', { name: 'Add endpoint' }).click()
      await owner.getByLabel('Endpoint URL').fill(HOOK_URL)
      await owner.getByLabel('Description').fill('CRM sync (nightly)')
      await checkPage(owner, viewport, 'webhook-new')
      await owner.getByRole('button', { name: 'Add endpoint' }).click()
      await owner.getByText('shown only this once').waitFor()
      await checkPage(owner, viewport, 'webhook-secret')
      await owner.getByRole('link', { name: /go to the endpoint/ }).click()
      await owner.getByRole('button', { name: 'Send test event' }).click()
      await owner.getByText('A webhook.test event is queued').waitFor()

      for (const [first, last, company, tags] of [
        ['Ada', 'Lovelace', 'Analytical Engines', ['vip', 'math']],
        ['Grace', 'Hopper', 'United States Navy', ['vip']],
        ['Bartholomew', 'Featherstonehaugh-Cholmondeley', 'A Company With A Rather Long Name Indeed', ['newsletter']],
      ] as const) {
        const created = await api('POST', '/contacts', {
          email: `${first.toLowerCase()}.${last.toLowerCase()}@example.com`,
          first_name: first,
          last_name: last,
          company,
          phone: '+441632960961',
          tags,
          custom_fields: { plan: 'pro', seats: 12 },
        })
        expect(created.status).toBe(201)
      }
      await owner.reload()
      await checkPage(owner, viewport, 'webhook-endpoint')
      await owner.getByRole('link', { name: 'Details' }).first().click()
      await owner.getByRole('heading', { name: /^Delivery wd_/ }).waitFor()
      await checkPage(owner, viewport, 'webhook-delivery')

      // The keys page right after the key was used: its use shows at once, and it never expires.
      await owner.goto(`${e.base}/app/${accountId}/settings/api`)
      const row = owner.getByRole('row', { name: /Production server/ })
      expect(await row.getByText('Within the last minute').isVisible()).toBe(true)
      expect(await row.getByText('Never', { exact: true }).isVisible()).toBe(true)
      expect(await row.getByRole('img', { name: /^3 requests in the last 14 days$/ }).isVisible()).toBe(true)
      await checkPage(owner, viewport, 'api-webhooks')
      await row.getByRole('link', { name: /^Roll…/ }).click()
      await checkPage(owner, viewport, 'key-roll')
      await owner.getByRole('link', { name: 'Cancel' }).click()
      await owner
        .getByRole('row', { name: /Production server/ })
        .getByRole('link', { name: /^Revoke…/ })
        .click()
      await checkPage(owner, viewport, 'key-revoke')
      await owner.getByRole('link', { name: 'Cancel' }).click()

      // The request log: the requests just made, and one of them in full.
      await owner.getByRole('navigation', { name: 'API & Webhooks' }).getByRole('link', { name: 'Request log' }).click()
      await checkPage(owner, viewport, 'request-log')
      await owner.getByRole('table').getByRole('link').first().click()
      await owner.getByRole('heading', { name: /^Request req_/ }).waitFor()
      await checkPage(owner, viewport, 'request-log-entry')

      // Contacts: the list, one contact's page, its delete confirmation, a new one.
      await owner.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Contacts' }).click()
      await checkPage(owner, viewport, 'contacts')
      await owner.getByRole('link', { name: 'Bartholomew Featherstonehaugh-Cholmondeley' }).click()
      await checkPage(owner, viewport, 'contact-edit')
      await owner.getByRole('link', { name: 'Delete contact…' }).click()
      await checkPage(owner, viewport, 'contact-delete')
      await owner.getByRole('link', { name: 'Cancel' }).click()
      await owner.getByRole('link', { name: '← Contacts' }).click()
      await owner.getByRole('link', { name: 'New contact' }).click()
      await owner.getByLabel('Email').fill('not-an-email')
      await owner.getByRole('button', { name: 'Create contact' }).click()
      await owner.getByRole('alert').waitFor()
      await checkPage(owner, viewport, 'contact-new-error')

      // Import: the form, then a file with problems: each named by row, column and value.
      await owner.getByRole('link', { name: '← Contacts' }).click()
      await owner.getByRole('link', { name: 'Import CSV' }).click()
      await checkPage(owner, viewport, 'import')
      await owner.getByLabel('CSV file').setInputFiles({
        name: 'new-customers.csv',
        mimeType: 'text/csv',
        buffer: Buffer.from(
          'email,first_name,phone\nfine@example.com,Fine,\nnot-an-email,Bad,\nok@example.com,Ok,12\n',
        ),
      })
      await owner.getByRole('button', { name: 'Import' }).click()
      await owner.getByText('Nothing was imported').waitFor({ timeout: 30_000 })
      const problems = owner.getByRole('table')
      expect(await problems.getByRole('cell', { name: 'not-an-email' }).isVisible()).toBe(true)
      expect(await owner.getByText('new-customers.csv').first().isVisible()).toBe(true)
      await checkPage(owner, viewport, 'import-failed', viewport.name === 'desktop')

      // Members: an invitation link, opened signed out by the invited person, who signs up from it
      // and comes back to it.
      await owner.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Settings' }).click()
      await owner.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Members' }).click()
      const invited = `colleague-${viewport.name}@example.com`
      await owner.getByLabel('Email').fill(invited)
      await owner.getByLabel('Role', { exact: true }).selectOption('admin')
      await owner.getByRole('button', { name: 'Create invitation link' }).click()
      await owner.getByText('shown only this once').waitFor()
      await checkPage(owner, viewport, 'invitation-link')
      const link = new URL(await owner.getByLabel('Invitation link').inputValue()).pathname

      const colleague = await newPage(viewport)
      await colleague.goto(`${e.base}${link}`)
      expect(await colleague.getByText(`The invitation is for ${invited}`).isVisible()).toBe(true)
      await checkPage(colleague, viewport, 'invitation')
      await colleague.getByRole('link', { name: 'Sign up' }).click()
      expect(await colleague.getByLabel('Email').inputValue()).toBe(invited)
      await colleague.getByLabel('Password').fill('correct-horse-battery')
      await colleague.getByLabel('Account name').fill('Colleague Co')
      await colleague.getByRole('button', { name: 'Sign up' }).click()
      await colleague.waitForURL(`${e.base}${link}`)
      await checkPage(colleague, viewport, 'invitation-accept')
      await colleague.getByRole('button', { name: 'Accept invitation' }).click()
      await colleague.waitForURL(`${e.base}/app/${accountId}/contacts`)

      await owner.getByRole('link', { name: 'Back to members' }).click()
      expect(await owner.getByLabel(`Role of ${invited}`).inputValue()).toBe('admin')
      await owner.getByLabel('Email').fill(`pending-${viewport.name}@example.com`)
      await owner.getByRole('button', { name: 'Create invitation link' }).click()
      await owner.getByRole('link', { name: 'Back to members' }).click()
      await checkPage(owner, viewport, 'members')

      // The person's menu → Your sessions (two browsers: this one and the colleague's are different people).
      await owner.locator('header details.user-menu summary').click()
      await owner.getByRole('banner').getByRole('link', { name: 'Your sessions' }).click()
      await checkPage(owner, viewport, 'sessions')
    }, 120_000)

    it(`at ${viewport.width} px, long unbroken values wrap (a 100-character key name, a long URL, a long name)`, async () => {
      const page = await newPage(viewport)
      const accountId = await signUpInBrowser(page, e.base, `long-${viewport.name}@example.com`, 'Long Values Ltd')
      const fits = async (what: string) => {
        const layout = await horizontalLayout(page)
        expect.soft(layout.offenders, `${what} at ${viewport.width} px`).toEqual([])
        expect.soft(layout.scrollWidth, `${what} at ${viewport.width} px`).toBeLessThanOrEqual(layout.innerWidth)
      }
      await page.goto(`${e.base}/app/${accountId}/settings/api`)
      await page.getByLabel('Name').fill('K'.repeat(100))
      await page.getByRole('button', { name: 'Create key' }).click()
      await page.getByText('shown only this once').waitFor()
      const key = await page.getByLabel('API key').inputValue()
      await page.getByRole('link', { name: /back to API keys/ }).click()
      await page.waitForURL(`${e.base}/app/${accountId}/settings/api`)
      await fits('keys table')
      await page.getByRole('link', { name: /^Revoke…/ }).click()
      // The click only starts the navigation: measure the revoke page, not the one being left.
      await page.getByRole('button', { name: 'Revoke key' }).waitFor()
      await fits('revoke page')

      await page.goto(`${e.base}/app/${accountId}/settings/api/webhooks`)
      await page.getByRole('link', { name: 'Add endpoint' }).click()
      await page.getByLabel('Endpoint URL').fill(`${HOOK_URL}/${'verylongpath'.repeat(15)}?x=${'a'.repeat(90)}`)
      await page.getByRole('button', { name: 'Add endpoint' }).click()
      await page.getByText('shown only this once').waitFor()
      await page.getByRole('link', { name: /go to the endpoint/ }).click()
      await page.getByRole('button', { name: 'Send test event' }).waitFor()
      await fits('endpoint')
      await page.getByRole('button', { name: 'Send test event' }).click()
      await page.getByText('A webhook.test event is queued').waitFor()
      await page.getByRole('link', { name: 'Details' }).first().click()
      await page.getByRole('heading', { name: /^Delivery wd_/ }).waitFor()
      await fits('delivery')

      const created = await fetch(`${e.base}/api/v1/contacts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'long@example.com', first_name: 'A'.repeat(90) }),
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      await page.goto(`${e.base}/app/${accountId}/contacts`)
      await fits('contacts list')
      await page.goto(`${e.base}/app/${accountId}/contacts/${id}`)
      await fits('contact')
      await page.getByRole('link', { name: 'Delete contact…' }).click()
      await page.waitForURL(`${e.base}/app/${accountId}/contacts/${id}/delete`)
      await fits('delete contact')
    }, 120_000)
  }
})
