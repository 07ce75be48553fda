// The languages Halley speaks, without Vue: shared by the i18n setup and its tests.

export type Language = 'zh-CN' | 'en'
export const LANGUAGES: { value: Language; label: string }[] = [
  { value: 'zh-CN', label: '中文' },
  { value: 'en', label: 'English' },
]

export function isLanguage(v: unknown): v is Language {
  return v === 'zh-CN' || v === 'en'
}

/** browserLanguage maps navigator languages onto the two Halley speaks: any Chinese is zh-CN, the rest English. */
export function browserLanguage(langs: readonly string[] = typeof navigator !== 'undefined' ? navigator.languages ?? [navigator.language] : []): Language {
  for (const l of langs) {
    if (/^zh\b/i.test(l)) return 'zh-CN'
    if (/^en\b/i.test(l)) return 'en'
  }
  return 'en'
}

