import { describe, expect, it } from 'vitest'
import en from './en'
import zhCN from './zh-CN'
import { browserLanguage, isLanguage } from './lang'

function keys(o: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(o).flatMap(([k, v]) => (v && typeof v === 'object' ? keys(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`]))
}

function params(s: string): string[] {
  return [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort()
}

describe('messages', () => {
  it('has the same keys in both languages', () => {
    expect(keys(zhCN).sort()).toEqual(keys(en).sort())
  })
  it('uses the same placeholders in both languages', () => {
    const get = (o: unknown, path: string) => path.split('.').reduce((a, k) => (a as Record<string, unknown>)[k], o) as string
    for (const k of keys(en)) expect([k, params(get(zhCN, k))]).toEqual([k, params(get(en, k))])
  })
  it('translates: no Chinese message is the English one (names and symbols aside)', () => {
    const same = keys(en).filter((k) => {
      const get = (o: unknown) => k.split('.').reduce((a, p) => (a as Record<string, unknown>)[p], o) as string
      return /[a-z]{3}/i.test(get(en)) && get(en) === get(zhCN)
    })
    expect(same).toEqual([])
  })
})

describe('browserLanguage', () => {
  it.each([
    [['zh-CN'], 'zh-CN'],
    [['zh-TW', 'en'], 'zh-CN'],
    [['zh'], 'zh-CN'],
    [['en-US', 'zh-CN'], 'en'],
    [['fr-FR', 'zh-CN'], 'zh-CN'],
    [['fr-FR'], 'en'],
    [[], 'en'],
  ])('%j → %s', (langs, want) => {
    expect(browserLanguage(langs)).toBe(want)
  })
  it('knows its languages', () => {
    expect(isLanguage('zh-CN')).toBe(true)
    expect(isLanguage('en')).toBe(true)
    expect(isLanguage('fr')).toBe(false)
    expect(isLanguage('')).toBe(false)
  })
})
