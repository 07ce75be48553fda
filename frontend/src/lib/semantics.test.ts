import { afterEach, describe, expect, it, vi } from 'vitest'
import { currentLang, errorText, semanticsMessages, st } from './semantics'

describe('semantics messages', () => {
  it('have the same keys in both languages, none empty', () => {
    const en = semanticsMessages.en as Record<string, Record<string, string>>
    const zh = semanticsMessages['zh-CN'] as Record<string, Record<string, string>>
    expect(Object.keys(zh).sort()).toEqual(Object.keys(en).sort())
    for (const section of Object.keys(en)) {
      expect(Object.keys(zh[section]).sort(), section).toEqual(Object.keys(en[section]).sort())
      for (const [k, v] of Object.entries(zh[section])) {
        expect(v.trim(), `${section}.${k}`).not.toBe('')
        expect(v, `${section}.${k} is not translated`).not.toBe(en[section][k] === 'N' ? '' : en[section][k])
      }
    }
  })

  it('explain the three joins in one sentence each', () => {
    for (const lang of ['en', 'zh-CN'] as const) {
      for (const k of ['andHelp', 'orHelp', 'minHelp']) {
        const text = st(`join.${k}`, {}, lang)
        expect(text.split(/[.。]\s*/).filter(Boolean), `${lang} ${k}`).toHaveLength(1)
      }
    }
  })

  it('say node errors in words, and unknown codes with the code', () => {
    expect(errorText('no_approver', 'en')).toMatch(/Nobody could be found/)
    expect(errorText('no_approver', 'zh-CN')).toMatch(/审批人/)
    expect(errorText('plugin_timeout', 'en')).toMatch(/did not finish in time/)
    expect(errorText('something_new', 'en')).toBe('A step failed with error “something_new”.')
    expect(st('error.atStep', { node: 'Grant' }, 'en')).toBe('at step “Grant”')
  })
})

describe('currentLang', () => {
  afterEach(() => vi.unstubAllGlobals())
  it('follows the language chosen on this browser, else the browser', () => {
    const store: Record<string, string> = {}
    vi.stubGlobal('localStorage', { getItem: (k: string) => store[k] ?? null })
    vi.stubGlobal('navigator', { languages: ['zh-TW', 'en'], language: 'zh-TW' })
    expect(currentLang()).toBe('zh-CN')
    store['halley.language'] = 'en'
    expect(currentLang()).toBe('en')
    delete store['halley.language']
    vi.stubGlobal('navigator', { languages: ['fr', 'en-GB'], language: 'fr' })
    expect(currentLang()).toBe('en')
  })
})
