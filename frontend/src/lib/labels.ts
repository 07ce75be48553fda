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

/** FieldTexts are a form field's texts in one language; OptionTexts an option's. */
export interface FieldTexts {
  label?: string
  placeholder?: string
  help?: string
  text?: string
}
export interface OptionTexts {
  label?: string
}

interface LocalizableOption {
  label: string
  i18n?: Partial<Record<Language, OptionTexts>>
}
interface LocalizableField {
  label: string
  placeholder?: string
  help?: string
  text?: string
  options?: LocalizableOption[]
  i18n?: Partial<Record<Language, FieldTexts>>
}

/** localizeField gives a form field with its texts (label, placeholder, help, text, option labels) in lang, each
 * falling back to the plain one: what a form shows. */
export function localizeField<F extends LocalizableField>(f: F, lang: Language = language.value): F {
  if (!f.i18n && !f.options?.some((o) => o.i18n)) return f
  const out: F = { ...f, label: localized(f, 'label', lang) }
  for (const k of ['placeholder', 'help', 'text'] as const) {
    const v = localized(f, k, lang)
    if (v) out[k] = v
  }
  if (f.options) out.options = f.options.map((o) => (o.i18n ? { ...o, label: localized(o, 'label', lang) } : o))
  return out
}

/** localizeForm gives a form schema with every field's texts in lang. */
export function localizeForm<S extends { fields?: LocalizableField[] }>(schema: S, lang: Language = language.value): S {
  if (!schema.fields?.length) return schema
  return { ...schema, fields: schema.fields.map((f) => localizeField(f, lang)) }
}

/** nodeName is a definition node's name in lang (default: the user's language), else its plain name, else its id. */
export function nodeName(n: { id: string; name?: string; i18n?: Partial<Record<Language, { name?: string }>> } | undefined | null, lang: Language = language.value): string {
  if (!n) return ''
  return localized(n as { name?: string } & Localized, 'name', lang) || n.id
}

/** instanceTitle is a request's title in lang: the rendering of its template's title pattern in that language
 * (title_i18n), else its title, else fallback. */
export function instanceTitle(x: { title?: string; title_i18n?: Partial<Record<string, string>>; instance_title_i18n?: Partial<Record<string, string>> } | undefined | null, fallback = '', lang: Language = language.value): string {
  if (!x) return fallback
  const own = x.title_i18n?.[lang] ?? x.instance_title_i18n?.[lang]
  if (typeof own === 'string' && own.trim()) return own
  return x.title || fallback
}

/** stepName names the step of a task or node state: its node's name in the user's language from the definition,
 * else the name the server gave (node_name, name), else its id. */
export function stepName(
  def: { nodes: { id: string; name?: string; i18n?: Partial<Record<Language, { name?: string }>> }[] } | undefined | null,
  x: { node_id: string; node_name?: string; name?: string },
  lang: Language = language.value,
): string {
  const n = def?.nodes.find((n) => n.id === x.node_id)
  return (n && localized(n as { name?: string } & Localized, 'name', lang)) || x.node_name || x.name || x.node_id
}
