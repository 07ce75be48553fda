// conditionText says an edge's MongoDB-style condition in short text — `days > 3 or lead_review.escalate = true` —
// as the server's diagrams do (service/condition/format.go), so the designer's canvas and the instance diagram
// label an edge alike. What it does not know (an operator of a newer server) it shows as JSON. readableCondition
// says the same for people, in their language, with the forms' labels.
import { t } from '@/i18n'

const MAX_STRING = 32 // runes of a string value
const MAX_LIST = 6 // items of a list; longer lists show the first five and "…"

type Part = { text: string; compound: boolean }

const leaf = (text: string): Part => ({ text, compound: false })

function joined(kids: Part[], sep: string): Part {
  if (kids.length === 0) return leaf('true')
  if (kids.length === 1) return kids[0]
  return { text: kids.map((k) => (k.compound ? `(${k.text})` : k.text)).join(sep), compound: true }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function truncate(s: string): string {
  const r = [...s]
  return r.length <= MAX_STRING ? s : r.slice(0, MAX_STRING - 1).join('') + '…'
}

function list(items: unknown[], each: (v: unknown) => string = value): string {
  const out: string[] = []
  for (let i = 0; i < items.length; i++) {
    if (i === MAX_LIST - 1 && items.length > MAX_LIST) {
      out.push('…')
      break
    }
    out.push(each(items[i]))
  }
  return `[${out.join(',')}]`
}

function value(v: unknown): string {
  if (v === null || v === undefined) return 'null'
  if (typeof v === 'string') return v === '' ? '""' : truncate(v)
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (Array.isArray(v)) return list(v)
  if (isObject(v)) {
    const keys = Object.keys(v)
    const out: string[] = []
    for (let i = 0; i < keys.length; i++) {
      if (i === MAX_LIST - 1 && keys.length > MAX_LIST) {
        out.push('…')
        break
      }
      out.push(`${truncate(keys[i])}:${value(v[keys[i]])}`)
    }
    return `{${out.join(',')}}`
  }
  return JSON.stringify(v)
}

// BSON type numbers by name, as $type accepts them.
const TYPE_NAMES: Record<number, string> = { 1: 'double', 2: 'string', 3: 'object', 4: 'array', 8: 'bool', 10: 'null', 16: 'int', 18: 'long', 19: 'decimal' }
const COMPARE: Record<string, string> = { $eq: '=', $ne: '!=', $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }

function regex(pattern: unknown, options: unknown): string {
  return `/${truncate(String(pattern ?? ''))}/${typeof options === 'string' ? options : ''}`
}

function operatorsOnly(v: unknown): v is Record<string, unknown> {
  return isObject(v) && Object.keys(v).length > 0 && Object.keys(v).every((k) => k.startsWith('$'))
}

// i18n-ignore-start: the condition language's operator words, written as the server's diagrams write them
/** field is the condition on one path: a literal means equality; an object of operators is each of them, all. */
function field(path: string, v: unknown): Part {
  const subject = path ? `${path} ` : ''
  if (!operatorsOnly(v)) return leaf(`${subject}= ${value(v)}`)
  const kids: Part[] = []
  for (const [op, arg] of Object.entries(v)) {
    if (op in COMPARE) kids.push(leaf(`${subject}${COMPARE[op]} ${value(arg)}`))
    else if (op === '$in' || op === '$nin') {
      const items = Array.isArray(arg) ? arg : [arg]
      kids.push(leaf(`${subject}${op === '$nin' ? 'not in' : 'in'} ${list(items, (x) => (isObject(x) && '$regex' in x ? regex(x.$regex, x.$options) : value(x)))}`))
    } else if (op === '$exists') kids.push(leaf(`${subject}${arg ? 'exists' : 'not exists'}`))
    else if (op === '$type') {
      const names = (Array.isArray(arg) ? arg : [arg]).map((x) => (typeof x === 'number' ? (TYPE_NAMES[x] ?? String(x)) : String(x)))
      kids.push(leaf(`${subject}is ${names.length === 1 ? names[0] : `[${names.join(',')}]`}`))
    } else if (op === '$regex') kids.push(leaf(`${subject}~ ${regex(arg, v.$options)}`))
    else if (op === '$options') continue // goes with $regex
    else if (op === '$size') kids.push(leaf(path ? `size(${path}) = ${value(arg)}` : `size = ${value(arg)}`))
    else if (op === '$all') kids.push(leaf(`${subject}all ${list(Array.isArray(arg) ? arg : [arg])}`))
    else if (op === '$elemMatch') kids.push(leaf(`${subject}any (${(operatorsOnly(arg) ? field('', arg) : query(arg)).text})`))
    else if (op === '$not') kids.push(leaf(`not (${field(path, arg).text})`))
    else kids.push(leaf(`${subject}${op} ${JSON.stringify(arg)}`))
  }
  return joined(kids, ' and ')
}

// i18n-ignore-end

function query(q: unknown): Part {
  if (!isObject(q)) return leaf(JSON.stringify(q))
  const kids: Part[] = []
  for (const [k, v] of Object.entries(q)) {
    const subs = () => (Array.isArray(v) ? v.map(query) : [query(v)])
    if (k === '$and') kids.push(joined(subs(), ' and '))
    else if (k === '$or') kids.push(joined(subs(), ' or '))
    else if (k === '$nor') kids.push(leaf(`not (${joined(subs(), ' or ').text})`))
    else kids.push(field(k, v))
  }
  return joined(kids, ' and ')
}

/** conditionText is a condition in short text; '' for none (an edge always taken). */
export function conditionText(cond: unknown): string {
  if (cond === null || cond === undefined || (isObject(cond) && Object.keys(cond).length === 0)) return ''
  try {
    return query(cond).text
  } catch {
    return JSON.stringify(cond)
  }
}

// ---- the readable form, in the user's language ----

/** ReadableField names a context path for people: its label, and its options' labels by value. */
export interface ReadableField {
  path: string
  label: string
  options?: { label: string; value: string }[]
}

const SYMBOL: Record<string, string> = { $eq: '=', $ne: '≠', $gt: '>', $gte: '≥', $lt: '<', $lte: '≤' }

/**
 * readableCondition says a condition as people read it — `天数 > 3 或 领导审批.上报 = 是` — with the fields' labels
 * (from the forms) instead of their paths and the operator words in the user's language. '' for none. The server
 * says conditions alike for the diagrams it draws in a language (service/condition/readable.go, ?lang=): change
 * the rules and words (condBuilder.text) in both places together.
 */
export function readableCondition(cond: unknown, fields: ReadableField[] = []): string {
  if (cond === null || cond === undefined || (isObject(cond) && Object.keys(cond).length === 0)) return ''
  const byPath = new Map(fields.map((f) => [f.path, f]))
  const label = (path: string) => byPath.get(path)?.label || path
  const val = (path: string, v: unknown): string => {
    if (v === true) return t('condBuilder.text.yes')
    if (v === false) return t('condBuilder.text.no')
    const opt = typeof v === 'string' ? byPath.get(path)?.options?.find((o) => o.value === v) : undefined
    if (opt) return opt.label
    if (Array.isArray(v)) return list(v, (x) => val(path, x))
    return value(v)
  }
  const words = { and: t('condBuilder.text.and'), or: t('condBuilder.text.or') }
  function fieldText(path: string, v: unknown): Part {
    const f = label(path)
    if (!operatorsOnly(v)) return leaf(`${f} = ${val(path, v)}`)
    const kids: Part[] = []
    for (const [op, arg] of Object.entries(v)) {
      if (op in SYMBOL) kids.push(leaf(`${f} ${SYMBOL[op]} ${val(path, arg)}`))
      else if (op === '$in' || op === '$nin') kids.push(leaf(t(`condBuilder.text.${op.slice(1)}`, { f, v: val(path, Array.isArray(arg) ? arg : [arg]) })))
      else if (op === '$exists') kids.push(leaf(t(arg ? 'condBuilder.text.exists' : 'condBuilder.text.notExists', { f })))
      else if (op === '$regex') kids.push(leaf(t('condBuilder.text.regex', { f, v: regex(arg, v.$options) })))
      else if (op === '$options') continue
      else if (op === '$type') kids.push(leaf(t('condBuilder.text.type', { f, v: value(arg) })))
      else if (op === '$size') kids.push(leaf(t('condBuilder.text.size', { f, v: value(arg) })))
      else if (op === '$all') kids.push(leaf(t('condBuilder.text.all', { f, v: val(path, Array.isArray(arg) ? arg : [arg]) })))
      else if (op === '$elemMatch') kids.push(leaf(t('condBuilder.text.any', { f, v: operatorsOnly(arg) ? fieldText('', arg).text.trim() : q(arg).text })))
      else if (op === '$not') kids.push(leaf(t('condBuilder.text.not', { x: fieldText(path, arg).text })))
      else kids.push(leaf(`${f} ${op} ${JSON.stringify(arg)}`))
    }
    return joined(kids, words.and)
  }
  function q(c: unknown): Part {
    if (!isObject(c)) return leaf(JSON.stringify(c))
    const kids: Part[] = []
    for (const [k, v] of Object.entries(c)) {
      const subs = () => (Array.isArray(v) ? v.map(q) : [q(v)])
      if (k === '$and') kids.push(joined(subs(), words.and))
      else if (k === '$or') kids.push(joined(subs(), words.or))
      else if (k === '$nor') kids.push(leaf(t('condBuilder.text.not', { x: joined(subs(), words.or).text })))
      else kids.push(fieldText(k, v))
    }
    return joined(kids, words.and)
  }
  try {
    return q(cond).text
  } catch {
    return JSON.stringify(cond)
  }
}
