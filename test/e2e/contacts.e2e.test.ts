// In a real browser: contacts create, search, edit, delete, and a CSV export → edit → import round trip.
import { readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browserAvailable, type E2E, SCREENSHOTS, signUpInBrowser, startE2E } from './browser.js'

describe.skipIf(!browserAvailable())('contacts in Chromium', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E()
  }, 60_000)
  afterAll(() => e?.close())

  it('create, search, edit, delete, and a CSV round trip', async () => {
    const context = await e.browser.newContext({ acceptDownloads: true })
    const page = await context.newPage()
    const accountId = await signUpInBrowser(page, e.base, 'e2e-contacts@example.com', 'Contacts Co')
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Contacts' }).click()

    for (const [first, last, email, company, tags] of [
      ['Ada', 'Lovelace', 'ada@example.com', 'Analytical Engines', 'vip, math'],
      ['Grace', 'Hopper', 'grace@example.com', 'Navy', 'vip'],
      ['Alan', 'Turing', 'alan@example.com', 'Bletchley', 'math'],
    ] as const) {
      await page.getByRole('link', { name: 'New contact' }).click()
      await page.getByLabel('First name').fill(first)
      await page.getByLabel('Last name').fill(last)
      await page.getByLabel('Email').fill(email)
      await page.getByLabel('Company').fill(company)
      await page.getByLabel('Tags').fill(tags)
      await page.getByRole('button', { name: 'Create contact' }).click()
      await page.waitForURL(/\/contacts\?notice=created$/)
    }
    expect(await page.locator('tbody tr').count()).toBe(3)

    // A mistake gets a message saying what to fix.
    await page.getByRole('link', { name: 'New contact' }).click()
    await page.getByLabel('Email').fill('not-an-email')
    await page.getByRole('button', { name: 'Create contact' }).click()
    expect(await page.getByRole('alert').textContent()).toContain('Fix the fields marked below')
    await page.goto(`${e.base}/app/${accountId}/contacts`)

    // The search is a GET form: the rows are counted once its page has loaded, not the page before.
    await page.getByLabel('Search').fill('lov')
    await page.getByRole('button', { name: 'Search' }).click()
    await page.waitForURL(/[?&]q=lov(&|$)/)
    expect(await page.locator('tbody tr').count()).toBe(1)
    expect(await page.locator('tbody').textContent()).toContain('Ada Lovelace')
    await page.getByLabel('Search').fill('')
    await page.getByLabel('Tag').fill('math')
    await page.getByRole('button', { name: 'Search' }).click()
    await page.waitForURL(/[?&]tag=math(&|$)/)
    expect(await page.locator('tbody tr').count()).toBe(2)

    await page.getByRole('link', { name: 'Alan Turing' }).click()
    await page.getByLabel('Job title').fill('Mathematician')
    await page.getByRole('button', { name: 'Save changes' }).click()
    await page.waitForURL(/notice=updated/)
    await page.goto(`${e.base}/app/${accountId}/contacts`)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'contacts.png'), fullPage: true })

    await page.getByRole('link', { name: 'Grace Hopper' }).click()
    await page.getByRole('link', { name: 'Delete contact…' }).click()
    await page.getByRole('button', { name: 'Delete contact' }).click()
    await page.waitForURL(/notice=deleted/)
    expect(await page.locator('tbody tr').count()).toBe(2)

    // Export, change a row, add a row, import: one update and one create.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export CSV' }).click(),
    ])
    const exported = readFileSync((await download.path()) as string, 'utf8')
    expect(exported.split('\n')[0]).toContain('email')
    expect(exported).toContain('ada@example.com')
    const eol = exported.includes('\r\n') ? '\r\n' : '\n'
    const edited = `${exported.replace('Lovelace', 'King').trimEnd()}${eol},new@example.com,Newt,,,,,,,,${eol}`
    const file = path.join(tmpdir(), `contacts-${Date.now()}.csv`)
    writeFileSync(file, edited)
    await page.getByRole('link', { name: 'Import CSV' }).click()
    await page.getByLabel('CSV file').setInputFiles(file)
    await page.getByRole('button', { name: 'Import' }).click()
    // The upload redirects to the job's page, which reloads itself (a Refresh header) until the job ends.
    await page.waitForURL(/\/contacts\/imports\/imp_/)
    await page.getByText('Import finished').waitFor({ timeout: 30_000 })
    const result = (await page.locator('main').textContent()) ?? ''
    expect(result).toMatch(/1\s+created/)
    expect(result).toMatch(/1\s+updated/)
    await page.goto(`${e.base}/app/${accountId}/contacts`)
    const body = (await page.locator('tbody').textContent()) ?? ''
    expect(body).toContain('Ada King')
    expect(body).toContain('Newt')
    expect(await page.locator('tbody tr').count()).toBe(3)
    await context.close()
  })
})
