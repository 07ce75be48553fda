// The UI's languages (zh-CN and en) through vue-i18n, and the matching locales of Element Plus (desktop) and Vant
// (phone). The language is the signed-in user's (GET /me `language`), else the one last chosen on this browser,
// else the browser's own. Every text a user reads is a message of en.ts and zh-CN.ts (untranslated.test.ts keeps
// it so); code outside components translates through `t` and `language` here.
import { computed, watch } from 'vue'
import { createI18n } from 'vue-i18n'
import { Locale as VantLocale } from 'vant'
import vantEn from 'vant/es/locale/lang/en-US'
import vantZh from 'vant/es/locale/lang/zh-CN'
import elEn from 'element-plus/es/locale/lang/en'
import elZh from 'element-plus/es/locale/lang/zh-cn'
import en from './en'
import zhCN from './zh-CN'
import { STORAGE_KEY, chosenLanguage, isLanguage, type Language } from './lang'

export { LANGUAGES, type Language } from './lang'

export const i18n = createI18n({
  legacy: false,
  locale: chosenLanguage(),
  fallbackLocale: 'en',
  messages: { en, 'zh-CN': zhCN },
  missingWarn: false,
  fallbackWarn: false,
})

export const language = computed<Language>(() => (isLanguage(i18n.global.locale.value) ? i18n.global.locale.value : 'en'))

/** elementLocale is Element Plus's locale for <el-config-provider>. */
export const elementLocale = computed(() => (language.value === 'zh-CN' ? elZh : elEn))

// Vant has no provider component: its locale is global, switched with the UI's.
watch(
  language,
  (lang) => {
    VantLocale.use(lang, lang === 'zh-CN' ? vantZh : vantEn)
    if (typeof document !== 'undefined') document.documentElement.lang = lang
  },
  { immediate: true },
)

/**
 * setLanguage switches the UI. remember keeps the choice on this browser (for the sign-in page); a user's own
 * choice is also stored on their profile by the caller (PUT /me).
 */
export function setLanguage(lang: Language | '' | undefined | null, remember = true): void {
  i18n.global.locale.value = isLanguage(lang) ? lang : chosenLanguage()
  if (remember && isLanguage(lang)) {
    try {
      localStorage.setItem(STORAGE_KEY, lang)
    } catch {
      /* private mode */
    }
  }
}

export const t = i18n.global.t
export const te = i18n.global.te
