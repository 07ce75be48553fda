import { beforeEach, describe, expect, it } from 'vitest'
import { ApiError } from '@/api/client'
import { setLanguage } from '@/i18n'
import { usePasswordChange } from './usePasswordChange'

function recorder(fail?: unknown) {
  const sent: [string, string][] = []
  const change = async (current: string, next: string) => {
    sent.push([current, next])
    if (fail) throw fail
  }
  return { sent, change }
}

describe('usePasswordChange', () => {
  beforeEach(() => setLanguage('en', false))

  it('sends a valid change and empties the fields', async () => {
    const r = recorder()
    const c = usePasswordChange(r.change)
    Object.assign(c.pw, { current: 'old-password', next: 'a-new-password', repeat: 'a-new-password' })
    expect(await c.submit()).toBe(true)
    expect(r.sent).toEqual([['old-password', 'a-new-password']])
    expect(c.pw).toEqual({ current: '', next: '', repeat: '' })
    expect(c.error.value).toBe('')
    expect(c.busy.value).toBe(false)
  })

  it('says what is wrong before sending anything', async () => {
    const r = recorder()
    const c = usePasswordChange(r.change)
    Object.assign(c.pw, { current: 'old-password', next: 'eight-ch', repeat: 'eight-cx' })
    expect(await c.submit()).toBe(false)
    expect(r.sent).toEqual([])
    expect(c.error.value).toBe('The two new passwords differ.')
    expect(c.pw.next).toBe('eight-ch') // kept for the person to correct
  })

  it('says the server’s refusal as the form’s message, in the language shown', async () => {
    const c = usePasswordChange(recorder(new ApiError(422, 'wrong_password', 'current password is wrong')).change)
    Object.assign(c.pw, { current: 'not-it', next: 'a-new-password', repeat: 'a-new-password' })
    expect(await c.submit()).toBe(false)
    expect(c.error.value).toBe('The current password is wrong.')
    setLanguage('zh-CN')
    expect(c.error.value).not.toBe('The current password is wrong.')
    expect(c.error.value).toMatch(/[\u4e00-\u9fff]/)
  })

  it('says any other failure as the API error it is, and clears it on the next try', async () => {
    const r = recorder(new ApiError(503, 'unavailable', 'the database is unreachable'))
    const c = usePasswordChange(r.change)
    Object.assign(c.pw, { current: 'old-password', next: 'a-new-password', repeat: 'a-new-password' })
    expect(await c.submit()).toBe(false)
    expect(c.error.value).toContain('the database is unreachable')
    c.pw.repeat = 'different'
    await c.submit()
    expect(c.error.value).toBe('The two new passwords differ.')
  })
})
