// The languages Halley speaks, without Vue: shared by the i18n setup and its tests.

export type Language = 'zh-CN' | 'en'
export const LANGUAGES: { value: Language; label: string }[] = [
  { value: 'zh-CN', label: '中文' },
  { value: 'en', label: 'English' }, // i18n-ignore: each language by its own name
]

/** STORAGE_KEY keeps the language last chosen on this browser (the sign-in page's switch, a profile save). */
export const STORAGE_KEY = 'halley.language'

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

/** storedLanguage is the language chosen on this browser, or null. */
export function storedLanguage(): Language | null {
  try {
    const v = localStorage.getItem(STORAGE_KEY)
    return isLanguage(v) ? v : null
  } catch {
    return null
  }
}

/** chosenLanguage is the UI language before a signed-in user's own: the one chosen on this browser, else the
 * browser's. */
export function chosenLanguage(): Language {
  return storedLanguage() ?? browserLanguage()
}
