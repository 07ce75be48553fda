import { describe, expect, it } from 'vitest'
import { localized } from './labels'

describe('localized', () => {
  const leave = { name: 'Leave', description: 'plain', i18n: { 'zh-CN': { name: '请假申请', description: '  ' }, en: { name: 'Leave request' } } }
  it('reads the language asked for and falls back to the plain text', () => {
    expect(localized(leave, 'name', 'zh-CN')).toBe('请假申请')
    expect(localized(leave, 'name', 'en')).toBe('Leave request')
    expect(localized(leave, 'description', 'zh-CN')).toBe('plain') // blank: the plain text
    expect(localized(leave, 'description', 'en')).toBe('plain')
    expect(localized({ name: 'x' }, 'name', 'en')).toBe('x')
    expect(localized(undefined, 'name' as never, 'en')).toBe('')
  })
})
