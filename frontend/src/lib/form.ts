// Form templates (seeds/003 "表单模版"): a component form, each field bound to a context path, or an HTML template
// shown in a sandboxed iframe. A form lives inside the definition: on a start node's `form` trigger (the form a
// user fills to start) and on an approval node's `form` (how the approver sees, and may edit, the context).
import { t } from '@/i18n'
import type { Language } from '@/i18n/lang'
import { localized, type FieldTexts, type OptionTexts } from './labels'
import { clone } from './clone'
import { flatten, getPath, isValidPath, setPath } from './path'

export const FIELD_TYPES = [
  'input',
  'textarea',
  'number',
  'money',
  'select',
  'multi-select',
  'radio',
  'checkbox',
  'date',
  'date-range',
  'time',
  'switch',
  'user',
  'department',
  'attachment',
  'file',
  'image',
  'description',
] as const
export type FieldType = (typeof FIELD_TYPES)[number]

export interface FieldOption {
  label: string
  value: string
  /** the label per language (zh-CN, en); the plain label is the fallback */
  i18n?: Partial<Record<Language, OptionTexts>>
}

/** A file of a file field: an uploaded attachment (id, name, size, content_type), or — in requests from before
 * attachments were uploaded — an inline file (name, size, type, data_url). */
export interface Attachment {
  name: string
  size: number
  id?: string
  content_type?: string
  type?: string
  data_url?: string
}

export interface FormField {
  /** unique within the form */
  id: string
  type: FieldType
  label: string
  /** dotted context path the value is read from and written to (not for `description`) */
  field?: string
  required?: boolean
  placeholder?: string
  help?: string
  default?: unknown
  options?: FieldOption[]
  min?: number
  max?: number
  precision?: number
  /** money: ISO currency shown beside the amount */
  currency?: string
  /** user picker: allow several users */
  multiple?: boolean
  /** description: the text shown */
  text?: string
  /** in an approver's form: shown but not editable */
  readonly?: boolean
  /** label, placeholder, help and text per language (zh-CN, en); the plain ones are the fallback */
  i18n?: Partial<Record<Language, FieldTexts>>
}

export interface FormSchema {
  kind: 'components' | 'html'
  fields?: FormField[]
  /** kind html: the template (HTML, CSS and JS) */
  html?: string
  /** kind html: a sample context for the designer's preview */
  mock?: Record<string, unknown>
}

// A field type's label is a message (fieldType.<type>), read when shown: it follows the language.
function fieldMeta(type: FieldType, icon: string, bound: boolean, hasOptions?: boolean) {
  return {
    get label() {
      return t(`fieldType.${type}`)
    },
    icon,
    bound,
    ...(hasOptions ? { hasOptions } : {}),
  }
}

export const FIELD_META: Record<FieldType, { label: string; icon: string; hasOptions?: boolean; bound: boolean }> = {
  input: fieldMeta('input', 'T', true),
  textarea: fieldMeta('textarea', '¶', true),
  number: fieldMeta('number', '#', true),
  money: fieldMeta('money', '¥', true),
  select: fieldMeta('select', '▾', true, true),
  'multi-select': fieldMeta('multi-select', '☰', true, true),
  radio: fieldMeta('radio', '◉', true, true),
  checkbox: fieldMeta('checkbox', '☑', true, true),
  date: fieldMeta('date', '▦', true),
  'date-range': fieldMeta('date-range', '↔', true),
  time: fieldMeta('time', '◷', true),
  switch: fieldMeta('switch', '◑', true),
  user: fieldMeta('user', '☺', true),
  department: fieldMeta('department', '⌂', true),
  attachment: fieldMeta('attachment', '▤', true),
  file: fieldMeta('file', '📎', true),
  image: fieldMeta('image', '▣', true),
  description: fieldMeta('description', 'ℹ', false),
}

export function emptyForm(kind: FormSchema['kind'] = 'components'): FormSchema {
  return kind === 'html'
    ? { kind: 'html', html: defaultHtml(), mock: { title: t('form.sample.title'), amount: 42 } }
    : { kind: 'components', fields: [] }
}

/** newField creates a field of the given type with an id and context path not used by the others; its texts (label,
 * options, description) are in the admin's language, as the form's data from then on. */
export function newField(type: FieldType, existing: FormField[]): FormField {
  const ids = new Set(existing.map((f) => f.id))
  const paths = new Set(existing.map((f) => f.field).filter(Boolean))
  let n = existing.length + 1
  while (ids.has(`f${n}`) || paths.has(`field_${n}`)) n++
  const f: FormField = { id: `f${n}`, type, label: FIELD_META[type].label }
  if (FIELD_META[type].bound) f.field = `field_${n}`
  if (FIELD_META[type].hasOptions) {
    f.options = [
      { label: t('form.sample.option', { n: 'A' }), value: 'a' },
      { label: t('form.sample.option', { n: 'B' }), value: 'b' },
    ]
  }
  if (type === 'money') {
    f.precision = 2
    f.currency = 'CNY'
  }
  if (type === 'description') f.text = t('form.sample.description')
  return f
}

/** emptyValue is the value a field starts with when neither the context nor a default gives one. */
export function emptyValue(f: FormField): unknown {
  switch (f.type) {
    case 'multi-select':
    case 'checkbox':
    case 'attachment':
    case 'file':
    case 'image':
      return []
    case 'user':
      return f.multiple ? [] : ''
    case 'date-range':
      return []
    case 'switch':
      return false
    case 'number':
    case 'money':
      return undefined
    default:
      return ''
  }
}

/** initialValues gives each bound field its value from the context, else its default, else an empty value. */
export function initialValues(schema: FormSchema | undefined, context: unknown = {}): Record<string, unknown> {
  const values: Record<string, unknown> = {}
  for (const f of schema?.fields ?? []) {
    if (!f.field) continue
    const fromCtx = getPath(context, f.field)
    values[f.id] = fromCtx !== undefined ? clone(fromCtx) : f.default !== undefined ? clone(f.default) : emptyValue(f)
  }
  return values
}

function isBlank(v: unknown): boolean {
  return v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)
}

/** validateValues checks required fields, number bounds and option membership; it returns messages by field id.
 * With onlyEditable, read-only fields are left out (an approver cannot fill them in). */
export function validateValues(schema: FormSchema | undefined, values: Record<string, unknown>, onlyEditable = false): Record<string, string> {
  const errors: Record<string, string> = {}
  for (const f of schema?.fields ?? []) {
    if (!f.field || (onlyEditable && f.readonly)) continue
    const v = values[f.id]
    if (f.required && (isBlank(v) || (f.type === 'switch' && v !== true && v !== false))) {
      errors[f.id] = t('form.required', { label: localized(f, 'label') || f.field })
      continue
    }
    if (isBlank(v)) continue
    if ((f.type === 'number' || f.type === 'money') && typeof v === 'number') {
      if (f.min !== undefined && v < f.min) errors[f.id] = t('form.atLeast', { label: localized(f, 'label'), min: f.min })
      else if (f.max !== undefined && v > f.max) errors[f.id] = t('form.atMost', { label: localized(f, 'label'), max: f.max })
    }
    if ((f.type === 'select' || f.type === 'radio') && f.options && !f.options.some((o) => o.value === v)) {
      errors[f.id] = t('form.chooseOption', { label: localized(f, 'label') })
    }
  }
  return errors
}

/** edited lists the field ids whose value differs from what the page loaded (initialValues). */
export function edited(values: Record<string, unknown>, initial: Record<string, unknown>): Set<string> {
  const out = new Set<string>()
  for (const id of new Set([...Object.keys(values), ...Object.keys(initial)])) {
    if (JSON.stringify(values[id]) !== JSON.stringify(initial[id])) out.add(id)
  }
  return out
}

/** shownErrors is what a form shows of its errors: a field's own once the person changed it, all of them once they
 * tried to submit — not a wall of "is required" on a form they have not touched yet. */
export function shownErrors(errors: Record<string, string>, values: Record<string, unknown>, initial: Record<string, unknown>, attempted: boolean): Record<string, string> {
  if (attempted) return errors
  const touched = edited(values, initial)
  return Object.fromEntries(Object.entries(errors).filter(([id]) => touched.has(id)))
}

/** keepEdits is the values of a form reloaded under a person's hands (the page refreshes while they type): the
 * fresh values, with every field they had changed since the last load kept as they left it. */
export function keepEdits(values: Record<string, unknown>, initial: Record<string, unknown>, fresh: Record<string, unknown>): Record<string, unknown> {
  const out = { ...fresh }
  for (const id of edited(values, initial)) {
    if (id in values) out[id] = values[id]
    else delete out[id]
  }
  return out
}

/** valuesToContext writes each bound field's value at its path; blank optional values are left out. */
export function valuesToContext(schema: FormSchema | undefined, values: Record<string, unknown>, onlyEditable = false): Record<string, unknown> {
  const ctx: Record<string, unknown> = {}
  for (const f of schema?.fields ?? []) {
    if (!f.field || !(f.id in values)) continue
    if (onlyEditable && f.readonly) continue
    const v = values[f.id]
    if (v === undefined || v === '') continue
    setPath(ctx, f.field, v)
  }
  return ctx
}

/** displayValue renders a value for reading (task pages, phone cards). */
export function displayValue(f: FormField | undefined, v: unknown): string {
  if (v === undefined || v === null || v === '') return '—'
  if (f?.options && (f.type === 'select' || f.type === 'radio')) {
    const o = f.options.find((o) => o.value === v)
    return o ? localized(o, 'label') : String(v)
  }
  if (f?.options && Array.isArray(v) && (f.type === 'multi-select' || f.type === 'checkbox')) {
    return v.map((x) => { const o = f.options!.find((o) => o.value === x); return o ? localized(o, 'label') : String(x) }).join(', ') || '—'
  }
  if (f?.type === 'switch') return v ? t('form.yes') : t('form.no')
  if (f?.type === 'money' && typeof v === 'number') {
    return `${v.toFixed(f.precision ?? 2)}${f.currency ? ' ' + f.currency : ''}`
  }
  if (f?.type === 'date-range' && Array.isArray(v)) return v.join(' → ')
  if ((f?.type === 'attachment' || f?.type === 'file' || f?.type === 'image') && Array.isArray(v)) {
    return v.map((a) => (a && typeof a === 'object' && typeof (a as Attachment).name === 'string' ? (a as Attachment).name : String(a))).join(', ') || '—'
  }
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ')
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}

export interface DisplayRow {
  label: string
  value: string
  path?: string
  field?: FormField
}

/**
 * displayRows is the read-only view of a context: through the form when there is one (its labels, its order, its
 * option labels), else every leaf of the context by path.
 */
export function displayRows(schema: FormSchema | undefined, context: unknown): DisplayRow[] {
  if (schema?.kind === 'components' && schema.fields?.length) {
    return schema.fields
      .filter((f) => f.type !== 'description' && f.field)
      .map((f) => ({ label: localized(f, 'label') || f.field!, value: displayValue(f, getPath(context, f.field!)), path: f.field, field: f }))
  }
  return flatten(context).map(([path, v]) => ({ label: path, value: displayValue(undefined, v), path }))
}

/** checkSchema lists problems the form designer shows before the form is saved into the definition. */
export function checkSchema(schema: FormSchema): string[] {
  const problems: string[] = []
  if (schema.kind === 'html') {
    if (!schema.html?.trim()) problems.push(t('form.problem.htmlEmpty'))
    return problems
  }
  const ids = new Set<string>()
  const paths = new Map<string, string>()
  for (const f of schema.fields ?? []) {
    if (ids.has(f.id)) problems.push(t('form.problem.sameId', { id: f.id }))
    ids.add(f.id)
    if (!FIELD_META[f.type]?.bound) continue
    if (!f.field || !isValidPath(f.field)) {
      problems.push(t('form.problem.needsField', { label: f.label }))
      continue
    }
    const other = paths.get(f.field)
    if (other) problems.push(t('form.problem.samePath', { label: f.label, other, path: f.field }))
    paths.set(f.field, f.label)
    if (FIELD_META[f.type].hasOptions && !(f.options ?? []).length) problems.push(t('form.problem.noOptions', { label: f.label }))
  }
  return problems
}

// The HTML template a new HTML form starts with: a small example for the admin to edit (its one word in their
// language).
function defaultHtml(): string {
  const amount = t('form.sample.amount').replace(/[<&]/g, (c) => (c === '<' ? '&lt;' : '&amp;'))
  // i18n-ignore-start: HTML, CSS and JavaScript of the example
  return `<style>
  body { font: 14px system-ui, sans-serif; margin: 12px; color: #24292f; }
  .amount { font-size: 28px; font-weight: 600; color: #1f6feb; }
</style>
<h3 id="title"></h3>
<p>${amount} <span class="amount" id="amount"></span></p>
<script>
  // window.halley.context is the instance context (the mock context in the designer).
  const c = window.halley.context;
  document.getElementById('title').textContent = c.title ?? '';
  document.getElementById('amount').textContent = c.amount ?? '';
</script>`
  // i18n-ignore-end
}

/**
 * htmlSrcdoc wraps an HTML template into the document the form frame writes (HtmlFormFrame: a sandboxed iframe of
 * the server's form-frame route, sandbox="allow-scripts", no same-origin): a CSP that forbids any network access,
 * the context as `window.halley.context`, and a script that reports the document height to the parent so the
 * frame can fit its content.
 */
export function htmlSrcdoc(html: string, context: unknown): string {
  // "<" escaped so that a value containing "</script>" cannot close the script element.
  const json = JSON.stringify(context ?? {}).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
  // i18n-ignore-start: the frame's document
  return `<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>window.halley = Object.freeze({ context: ${json} });</script>
</head><body>
${html}
<script>
(function () {
  function report() { parent.postMessage({ halleyFrameHeight: document.documentElement.scrollHeight }, '*'); }
  window.addEventListener('load', report);
  new ResizeObserver(report).observe(document.documentElement);
})();
</script>
</body></html>`
  // i18n-ignore-end
}

/** formOf extracts a form schema from whatever GET /forms/{key} or a trigger holds. */
export function formOf(v: unknown): FormSchema | undefined {
  if (!v || typeof v !== 'object') return undefined
  const o = v as Record<string, unknown>
  if (o.form && typeof o.form === 'object') return formOf(o.form)
  if (o.trigger && typeof o.trigger === 'object') return formOf(o.trigger)
  if (o.kind === 'components' || o.kind === 'html' || Array.isArray(o.fields)) {
    return { ...(o as unknown as FormSchema), kind: o.kind === 'html' ? 'html' : 'components' }
  }
  return undefined
}

/** sampleContext builds a plausible context from a form, to prefill the condition tester. */
export function sampleContext(schema: FormSchema | undefined): Record<string, unknown> {
  const ctx: Record<string, unknown> = {}
  for (const f of schema?.fields ?? []) {
    if (!f.field) continue
    let v: unknown
    switch (f.type) {
      case 'number':
        v = f.min !== undefined ? Math.max(f.min, 3) : 3
        break
      case 'money':
        v = 100
        break
      case 'switch':
        v = true
        break
      case 'select':
      case 'radio':
        v = f.options?.[0]?.value ?? ''
        break
      case 'multi-select':
      case 'checkbox':
        v = f.options?.slice(0, 1).map((o) => o.value) ?? []
        break
      case 'date':
        v = '2030-01-01'
        break
      case 'date-range':
        v = ['2030-01-01', '2030-01-03']
        break
      case 'time':
        v = '09:00'
        break
      case 'user':
        v = f.multiple ? ['alice'] : 'alice'
        break
      case 'attachment':
      case 'file':
      case 'image':
        v = []
        break
      default:
        v = 'text'
    }
    setPath(ctx, f.field, v)
  }
  return ctx
}
