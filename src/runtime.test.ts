import { describe, expect, it } from 'vitest'
import { checkNodeVersion } from './runtime.js'

describe('checkNodeVersion', () => {
  it('accepts the LTS lines 22, 24 and 26 as they are', () => {
    for (const version of ['22.0.0', '22.23.3', '24.21.0', '26.10.0']) {
      expect(checkNodeVersion(version)).toEqual({ ok: true })
    }
  })

  it('refuses below 22 with the fix in the message', () => {
    for (const version of ['20.20.2', '18.20.8', '21.7.3']) {
      const check = checkNodeVersion(version)
      expect(check.ok).toBe(false)
      expect(check.ok ? '' : check.message).toContain(`Node ${version} is not supported (Node 22, 24, 26)`)
      expect(check.ok ? '' : check.message).toContain('npm start')
    }
  })

  it('runs an odd or future line but says it is untested', () => {
    for (const version of ['23.11.1', '25.2.0', '27.0.0']) {
      const check = checkNodeVersion(version)
      expect(check).toMatchObject({ ok: true, warning: expect.stringContaining(`Node ${version} is untested`) })
    }
  })

  it('refuses a version it cannot read', () => {
    expect(checkNodeVersion('not-a-version').ok).toBe(false)
  })

  it('is the version this suite runs on: CI runs it on 22, 24 and 26', () => {
    expect(checkNodeVersion(process.versions.node)).toEqual({ ok: true })
  })
})
