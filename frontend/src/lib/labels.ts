// Per-language labels (API.md "Additions of 2026-11-28"): a template, a node or a form field may carry its texts in
// zh-CN and en beside the plain ones — `"i18n": {"en": {"name": "Leave request"}, "zh-CN": {"name": "请假申请"}}` —
// and people read them in their language, falling back to the plain text.
import { language } from '@/i18n'
import type { Language } from '@/i18n/lang'

export type Texts = Partial<Record<string, string>>
export interface Localized {
  i18n?: Partial<Record<Language, Texts>>
}

/** localized is obj's text key in lang (default: the user's language), else its plain text. */
export function localized<T extends object>(obj: T | undefined | null, key: keyof T & string, lang: Language = language.value): string {
  if (!obj) return ''
  const own = (obj as Localized).i18n?.[lang]?.[key]
  if (typeof own === 'string' && own.trim()) return own
  const plain = (obj as Record<string, unknown>)[key]
  return typeof plain === 'string' ? plain : ''
}

/** templateText: a template's name and description in the user's language. */
export function templateText(t: { name?: string; description?: string; key?: string } & Localized): { name: string; description: string } {
  return { name: localized(t, 'name') || t.key || '', description: localized(t, 'description') }
}
