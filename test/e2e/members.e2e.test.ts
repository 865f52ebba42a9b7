// In a real browser: an owner invites a colleague from Settings → Members and passes the link on;
// the colleague, who has no account yet, opens it, signs up with the invited email, opens it
// again and accepts, and lands in the owner's account with the role they were given.
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browserAvailable, type E2E, SCREENSHOTS, signUpInBrowser, startE2E } from './browser.js'

describe.skipIf(!browserAvailable())('invitations in Chromium', () => {
  let e: E2E
  beforeAll(async () => {
    e = await startE2E()
  }, 60_000)
  afterAll(() => e?.close())

  it('invite → sign up as the invited person → accept → member of the account', async () => {
    const ownerContext = await e.browser.newContext()
    const owner = await ownerContext.newPage()
    const accountId = await signUpInBrowser(owner, e.base, 'e2e-owner@example.com', 'Invite Co')

    await owner.getByRole('link', { name: 'Settings', exact: true }).click()
    await owner.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Members' }).click()
    await owner.getByLabel('Email').fill('e2e-colleague@example.com')
    await owner.getByLabel('Role', { exact: true }).selectOption('admin')
    await owner.getByRole('button', { name: 'Create invitation link' }).click()
    await owner.getByText('shown only this once').waitFor()
    const link = await owner.getByLabel('Invitation link').inputValue()
    expect(link).toMatch(/\/invitations\/[A-Za-z0-9_-]{43}$/)
    await owner.screenshot({ path: path.join(SCREENSHOTS, 'invitation-link.png'), fullPage: true })
    // The harness's APP_URL is not this server's port: the path is what matters.
    const invitation = `${e.base}${new URL(link).pathname}`

    const colleagueContext = await e.browser.newContext({ viewport: { width: 390, height: 844 } })
    const colleague = await colleagueContext.newPage()
    await colleague.goto(invitation)
    await colleague.getByRole('heading', { name: 'Join Invite Co' }).waitFor()
    expect(await colleague.getByText('Sign in as e2e-colleague@example.com, or sign up').isVisible()).toBe(true)
    await signUpInBrowser(colleague, e.base, 'e2e-colleague@example.com', 'Colleague Co')
    await colleague.goto(invitation)
    await colleague.screenshot({ path: path.join(SCREENSHOTS, 'invitation-accept-phone.png'), fullPage: true })
    await colleague.getByRole('button', { name: 'Accept invitation' }).click()
    await colleague.waitForURL(new RegExp(`/app/${accountId}/contacts$`))
    expect(await colleague.locator('header details.account-menu summary').innerText()).toContain('Invite Co')
    // Used: the link no longer opens anything.
    await colleague.goto(invitation)
    expect(await colleague.getByText('This invitation link is not valid').isVisible()).toBe(true)

    await owner.goto(`${e.base}/app/${accountId}/settings/members`)
    const row = owner.getByRole('row', { name: /e2e-colleague@example\.com/ })
    expect(await row.getByRole('cell', { name: 'admin', exact: true }).isVisible()).toBe(true)
    await owner.screenshot({ path: path.join(SCREENSHOTS, 'members.png'), fullPage: true })
    await ownerContext.close()
    await colleagueContext.close()
  }, 60_000)
})
