// Debian's Chromium driven by playwright-core, and the app on a real port, for end-to-end tests.
import { existsSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { type Browser, chromium, type Page } from 'playwright-core'
import type { Resolver } from '../../src/webhooks/webhook-url.js'
import { createTestHarness, type TestHarness } from '../harness.js'

export const CHROMIUM = '/usr/bin/chromium'
export const SCREENSHOTS = path.resolve('test-artifacts/screenshots')

/** Locally without Chromium the browser suite is skipped; in CI it must run. */
export function browserAvailable(): boolean {
  if (existsSync(CHROMIUM)) {
    return true
  }
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but ${CHROMIUM} is missing: .ci/run installs Debian's chromium package.`)
  }
  console.log(`Browser suite skipped: ${CHROMIUM} not found (apt-get install -y chromium to enable it).`)
  return false
}

export interface E2E {
  t: TestHarness
  app: FastifyInstance
  base: string
  browser: Browser
  close(): Promise<void>
}

/** `resolve`: host names for webhook URLs (test/static-resolver.ts), so no test touches real DNS. */
export async function startE2E(options: { resolve?: Resolver } = {}): Promise<E2E> {
  const t = await createTestHarness({ dialect: 'sqlite', ...options })
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' })
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
  mkdirSync(SCREENSHOTS, { recursive: true })
  return {
    t,
    app: t.app,
    base,
    browser,
    async close() {
      await browser.close()
      await t.close()
    },
  }
}

export async function signUpInBrowser(page: Page, base: string, email: string, accountName: string): Promise<string> {
  await page.goto(`${base}/sign-up`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill('correct-horse-battery')
  await page.getByLabel('Account name').fill(accountName)
  await page.getByRole('button', { name: 'Sign up' }).click()
  // Sign-up lands where sign-in does: the account's contacts.
  await page.waitForURL(/\/app\/acct_[0-9A-Z]+\/contacts$/)
  return /\/app\/(acct_[0-9A-Z]+)\//.exec(page.url())?.[1] ?? ''
}
