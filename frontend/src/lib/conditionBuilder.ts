// The condition builder's model: rows of field · operator · value in AND/OR groups, compiled to the MongoDB-style
// query of an edge (docs/conditions.md) and parsed back. A query the rows cannot say (an operator such as $elemMatch,
// $nor or $not) is left to the JSON editor: parseCondition says which operators it met.
import type { FormField, FormSchema } from './form'
import type { DefNode } from './definition'
import { localizeField } from './labels'
import { language } from '@/i18n'
import type { Language } from '@/i18n/lang'

export const OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'exists', 'notExists', 'regex'] as const
export type Op = (typeof OPS)[number]

export interface CondRow {
  kind: 'row'
  field: string
  op: Op
  value?: unknown
}
export interface CondGroup {
  kind: 'group'
  join: 'and' | 'or'
  items: (CondRow | CondGroup)[]
}

const MONGO: Partial<Record<Op, string>> = { ne: '$ne', gt: '$gt', gte: '$gte', lt: '$lt', lte: '$lte', in: '$in', nin: '$nin', regex: '$regex' }
const FROM_MONGO: Record<string, Op> = { $eq: 'eq', $ne: 'ne', $gt: 'gt', $gte: 'gte', $lt: 'lt', $lte: 'lte', $in: 'in', $nin: 'nin', $regex: 'regex' }

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
const operatorsOnly = (v: unknown): v is Record<string, unknown> => isObject(v) && Object.keys(v).length > 0 && Object.keys(v).every((k) => k.startsWith('$'))

/** rowOperand is what a row writes for its field: a literal for equality, else {$op: value}. */
function rowOperand(r: CondRow): unknown {
  switch (r.op) {
    case 'eq':
      // an object or operator-looking literal needs $eq to be read as a value
      return isObject(r.value) ? { $eq: r.value } : r.value
    case 'exists':
      return { $exists: true }
    case 'notExists':
      return { $exists: false }
    case 'in':
    case 'nin':
      return { [MONGO[r.op]!]: Array.isArray(r.value) ? r.value : r.value === undefined || r.value === '' ? [] : [r.value] }
    default:
      return { [MONGO[r.op]!]: r.value ?? null }
  }
}

/** compileCondition writes rows and groups as a query; an empty group is {} (always taken). */
export function compileCondition(g: CondGroup | CondRow): Record<string, unknown> {
  if (g.kind === 'row') return { [g.field]: rowOperand(g) }
  const items = g.items.map(prune).filter((i): i is CondRow | CondGroup => i !== null)
  if (items.length === 0) return {}
  if (items.length === 1) return compileCondition(items[0])
  if (g.join === 'or') return { $or: items.map(compileCondition) }
  // AND of rows, each field's rows together and not repeated: one object, {"days": {"$gt": 3}, "type": "annual"}.
  if (items.every((i) => i.kind === 'row')) {
    const rows = items as CondRow[]
    const out: Record<string, unknown> = {}
    let ok = true
    for (let i = 0; i < rows.length && ok; i++) {
      const r = rows[i]
      if (r.field.startsWith('$') || r.field === '') ok = false
      else if (!(r.field in out)) out[r.field] = rowOperand(r)
      else {
        const prev = out[r.field]
        const cur = rowOperand(r)
        // only next to the same field, both operator objects without a shared operator
        if (rows[i - 1].field !== r.field || !operatorsOnly(prev) || !operatorsOnly(cur) || '$eq' in prev || Object.keys(cur).some((k) => k in prev)) ok = false
        else out[r.field] = { ...prev, ...cur }
      }
    }
    if (ok) return out
  }
  return { $and: items.map(compileCondition) }
}

/** prune drops the rows without a field (not chosen yet) and the groups left empty. */
function prune(i: CondRow | CondGroup): CondRow | CondGroup | null {
  if (i.kind === 'row') return i.field.trim() ? i : null
  const items = i.items.map(prune).filter((x): x is CondRow | CondGroup => x !== null)
  return items.length ? { ...i, items } : null
}

export type ParsedCondition = { ok: true; group: CondGroup } | { ok: false; unsupported: string[] }

/** parseCondition reads a query as rows and groups (the top is always a group), or names what it cannot show. */
export function parseCondition(q: unknown): ParsedCondition {
  const unsupported = new Set<string>()
  const group = (join: 'and' | 'or', items: (CondRow | CondGroup)[]): CondGroup => ({ kind: 'group', join, items })
  function query(v: unknown): (CondRow | CondGroup)[] {
    if (!isObject(v)) {
      unsupported.add(JSON.stringify(v))
      return []
    }
    const out: (CondRow | CondGroup)[] = []
    for (const [k, x] of Object.entries(v)) {
      if (k === '$and' || k === '$or') {
        if (!Array.isArray(x) || x.length === 0) {
          unsupported.add(k)
          continue
        }
        const kids = x.map((s) => one(s))
        if (k === '$and' && Object.keys(v).length === 1) out.push(...kids.flatMap((c) => (c.kind === 'group' && c.join === 'and' ? c.items : [c])))
        else out.push(group(k === '$and' ? 'and' : 'or', kids))
      } else if (k.startsWith('$')) unsupported.add(k)
      else out.push(...field(k, x))
    }
    return out
  }
  function one(v: unknown): CondRow | CondGroup {
    const items = query(v)
    return items.length === 1 ? items[0] : group('and', items)
  }
  function field(path: string, v: unknown): CondRow[] {
    if (!operatorsOnly(v)) return [{ kind: 'row', field: path, op: 'eq', value: v }]
    const rows: CondRow[] = []
    for (const [op, arg] of Object.entries(v)) {
      if (op === '$exists') rows.push({ kind: 'row', field: path, op: arg ? 'exists' : 'notExists' })
      else if (op === '$regex' && typeof arg === 'string' && !('$options' in v)) rows.push({ kind: 'row', field: path, op: 'regex', value: arg })
      else if ((op === '$in' || op === '$nin') && Array.isArray(arg)) rows.push({ kind: 'row', field: path, op: FROM_MONGO[op], value: arg })
      else if (op in FROM_MONGO && op !== '$regex' && op !== '$in' && op !== '$nin') rows.push({ kind: 'row', field: path, op: FROM_MONGO[op], value: arg })
      else unsupported.add(op)
    }
    return rows
  }
  if (q === undefined || q === null) return { ok: true, group: group('and', []) }
  const top = one(q)
  if (unsupported.size) return { ok: false, unsupported: [...unsupported] }
  return { ok: true, group: top.kind === 'group' ? top : group('and', [top]) }
}

/** ConditionField is a field a condition may read: its context path, its label and its form type. */
export interface ConditionField {
  path: string
  label: string
  type: FormField['type']
  options?: FormField['options']
}

/** conditionFields offers the fields of the start form first, then those of the approvers' forms, one per path,
 * with their labels and their options' labels in lang (default: the user's language; each falls back to the plain
 * one), so that a condition reads "天数 > 3" on a Chinese page and "Days > 3" on an English one. */
export function conditionFields(nodes: DefNode[], lang: Language = language.value): ConditionField[] {
  const out = new Map<string, ConditionField>()
  const start = nodes.find((n) => n.type === 'start')
  const forms: (FormSchema | undefined)[] = [start?.trigger?.form as FormSchema | undefined, ...nodes.filter((n) => n.type === 'approval').map((n) => n.form as FormSchema | undefined)]
  for (const f of forms) {
    for (const fld of f?.fields ?? []) {
      if (!fld.field || fld.type === 'description' || out.has(fld.field)) continue
      const f = localizeField(fld, lang)
      out.set(fld.field, { path: fld.field, label: f.label || fld.field, type: fld.type, options: f.options })
    }
  }
  return [...out.values()]
}

/** The operators a field type offers. */
export function opsFor(type: FormField['type'] | undefined): Op[] {
  switch (type) {
    case 'number':
    case 'money':
    case 'date':
    case 'time':
      return ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'exists', 'notExists']
    case 'switch':
      return ['eq', 'ne', 'exists', 'notExists']
    case 'select':
    case 'radio':
    case 'user':
    case 'department':
      return ['eq', 'ne', 'in', 'nin', 'exists', 'notExists']
    case 'multi-select':
    case 'checkbox':
      return ['eq', 'in', 'nin', 'exists', 'notExists']
    default:
      return [...OPS]
  }
}

/** needsValue: exists and notExists take none; in and nin a list. */
export const needsValue = (op: Op) => op !== 'exists' && op !== 'notExists'
export const takesList = (op: Op) => op === 'in' || op === 'nin'

/** typedValue reads what was typed as the field's type: a number for numbers, true/false for a switch. */
export function typedValue(type: FormField['type'] | undefined, v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => typedValue(type, x))
  if (typeof v !== 'string') return v
  if ((type === 'number' || type === 'money') && v.trim() !== '' && !Number.isNaN(Number(v))) return Number(v)
  if (type === 'switch') return v === 'true' ? true : v === 'false' ? false : v
  return v
}
