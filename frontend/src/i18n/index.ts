// The UI's languages (zh-CN and en) through vue-i18n, and the matching locales of Element Plus (desktop) and Vant
// (phone). The language is the signed-in user's (GET /me `language`), else the one last chosen on this browser,
// else the browser's own.
import { computed } from 'vue'
import { createI18n } from 'vue-i18n'
import { Locale as VantLocale } from 'vant'
import vantEn from 'vant/es/locale/lang/en-US'
import vantZh from 'vant/es/locale/lang/zh-CN'
import elEn from 'element-plus/es/locale/lang/en'
import elZh from 'element-plus/es/locale/lang/zh-cn'
import en from './en'
import zhCN from './zh-CN'
import { browserLanguage, isLanguage, type Language } from './lang'

export { LANGUAGES, type Language } from './lang'

const STORAGE_KEY = 'halley.language'

function stored(): Language | null {
  try {
    const v = localStorage.getItem(STORAGE_KEY)
    return isLanguage(v) ? v : null
  } catch {
    return null
  }
}

export const i18n = createI18n({
  legacy: false,
  locale: stored() ?? browserLanguage(),
  fallbackLocale: 'en',
  messages: { en, 'zh-CN': zhCN },
  missingWarn: false,
  fallbackWarn: false,
})

export const language = computed<Language>(() => (isLanguage(i18n.global.locale.value) ? i18n.global.locale.value : 'en'))

/** elementLocale is Element Plus's locale for <el-config-provider>. */
export const elementLocale = computed(() => (language.value === 'zh-CN' ? elZh : elEn))

function applyLocale(lang: Language): void {
  VantLocale.use(lang, lang === 'zh-CN' ? vantZh : vantEn)
  if (typeof document !== 'undefined') document.documentElement.lang = lang
}
applyLocale(language.value)

/**
 * setLanguage switches the UI. remember keeps the choice on this browser (for the sign-in page); a user's own
 * choice is also stored on their profile by the caller (PUT /me).
 */
export function setLanguage(lang: Language | '' | undefined | null, remember = true): void {
  const l = isLanguage(lang) ? lang : stored() ?? browserLanguage()
  i18n.global.locale.value = l
  applyLocale(l)
  if (remember && isLanguage(lang)) {
    try {
      localStorage.setItem(STORAGE_KEY, lang)
    } catch {
      /* private mode */
    }
  }
}

export const t = i18n.global.t
