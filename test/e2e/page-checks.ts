// What every page must pass in the browser, at each width: no horizontal scrolling, every control
// inside the viewport, no serious or critical axe-core violation; and its screenshot for the docs.
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { Page } from 'playwright-core'
import { expect } from 'vitest'

export const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const
export type Viewport = (typeof VIEWPORTS)[number]

/** Tracked in git and linked from docs/web-app.md: rewritten only on request (SCREENSHOTS=1). */
export const DOCS_SCREENSHOTS = path.resolve('docs/screenshots')
const SAVE_SCREENSHOTS = process.env.SCREENSHOTS === '1'
/** Budgets from the brief: each file small enough for a repository, all of them together too. */
export const SCREENSHOT_MAX_BYTES = 200 * 1024
const SCREENSHOTS_TOTAL_MAX_BYTES = 3 * 1024 * 1024
/** A full page taller than this is cut (the top is what the docs show; the checks cover it all). */
const SCREENSHOT_MAX_HEIGHT = 2400

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

export interface Offender {
  element: string
  left: number
  right: number
}

/**
 * The controls a person acts with (links, buttons, form fields, disclosure summaries) that are
 * rendered but lie partly left or right of the viewport, and the document's scroll width.
 */
export async function horizontalLayout(
  page: Page,
): Promise<{ scrollWidth: number; innerWidth: number; offenders: Offender[] }> {
  return page.evaluate(LAYOUT_SCRIPT)
}

// In the page (a string: the project's TypeScript has no DOM types).
const LAYOUT_SCRIPT = `(() => {
  const offenders = []
  for (const element of document.querySelectorAll('a, button, input, select, textarea, summary')) {
    if (element.type === 'hidden') continue
    const rect = element.getBoundingClientRect()
    // Not rendered: display:none, a closed <details>' content, the copy button without its script.
    if (rect.width === 0 && rect.height === 0) continue
    // Half a pixel for subpixel rounding.
    if (rect.left < -0.5 || rect.right > window.innerWidth + 0.5) {
      const label = (element.textContent || element.getAttribute('aria-label') || element.id || '').trim()
      offenders.push({
        element: element.tagName.toLowerCase() + ' "' + label.slice(0, 40) + '"',
        left: Math.round(rect.left),
        right: Math.round(rect.right),
      })
    }
  }
  return { scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, offenders }
})()`

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: unknown[] }[]
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's CSP (script-src 'self') does not
  // govern, so the page is checked exactly as it is served.
  await page.evaluate(axeSource)
  const violations: AxeViolation[] = await page.evaluate(
    "axe.run(document, { resultTypes: ['violations'] }).then((result) => result.violations)",
  )
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)
}

/**
 * Asserts the page's layout and accessibility, and saves its screenshot when SCREENSHOTS=1 unless
 * `saved` is false: docs/screenshots/ keeps within its budget by leaving out pages a saved one shows.
 */
export async function checkPage(page: Page, viewport: Viewport, name: string, saved = true): Promise<void> {
  // A click on a link resolves before the next page is loaded: checked mid-load, its body could
  // still be null (CI's Node 26 leg once read document.body.scrollWidth of a page not yet parsed).
  await page.waitForLoadState('load')
  const layout = await horizontalLayout(page)
  expect.soft(layout.offenders, `${name} at ${viewport.width} px: controls outside the viewport`).toEqual([])
  expect
    .soft(layout.scrollWidth, `${name} at ${viewport.width} px: document wider than the viewport`)
    .toBeLessThanOrEqual(layout.innerWidth)
  expect.soft(await axeViolations(page), `${name} at ${viewport.width} px: axe-core`).toEqual([])
  if (SAVE_SCREENSHOTS && saved) {
    await saveScreenshot(page, `${name}-${viewport.name}`)
  }
}

async function saveScreenshot(page: Page, file: string): Promise<void> {
  mkdirSync(DOCS_SCREENSHOTS, { recursive: true })
  const target = path.join(DOCS_SCREENSHOTS, `${file}.png`)
  const height: number = await page.evaluate('document.documentElement.scrollHeight')
  const width = page.viewportSize()?.width ?? 1280
  await page.screenshot({
    path: target,
    fullPage: true,
    clip: { x: 0, y: 0, width, height: Math.min(height, SCREENSHOT_MAX_HEIGHT) },
  })
  expect(statSync(target).size, `${target} is over the size budget`).toBeLessThan(SCREENSHOT_MAX_BYTES)
}

/** After a SCREENSHOTS=1 run: all of docs/screenshots/ together within its budget. */
export function checkScreenshotsBudget(): void {
  if (!SAVE_SCREENSHOTS) {
    return
  }
  const total = readdirSync(DOCS_SCREENSHOTS)
    .filter((file) => file.endsWith('.png'))
    .reduce((sum, file) => sum + statSync(path.join(DOCS_SCREENSHOTS, file)).size, 0)
  expect(total, 'docs/screenshots/ in all').toBeLessThan(SCREENSHOTS_TOTAL_MAX_BYTES)
}
