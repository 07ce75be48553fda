// The form a person fills to start a request: the template's own (a form start trigger's form), or one generated
// from what the process reads of the context — the fields its edge conditions test, the fields approvers are taken
// from, and the fields its approval forms show read-only (the applicant's data the approvers look at) — each with
// the type those uses imply. What approvers fill in themselves (editable fields of their forms, data stored under a
// node's id) is not asked of the applicant. A person never has to type JSON to start an ordinary request.
import type { Approvers, Definition, DefEdge, DefNode } from './definition'
import { formOf, type FieldOption, type FieldType, type FormField, type FormSchema } from './form'
import { isValidPath } from './path'

export interface StartForm {
  schema: FormSchema
  /** true when Halley made the form up from the definition (the template has none of its own) */
  generated: boolean
}

/** startFormOf gives the start form of a definition, or undefined when the process reads nothing of the context
 * (a title is all it needs) or the start does not take a form (crontab, API, message starts). */
export function startFormOf(def: Pick<Definition, 'nodes' | 'edges'> | undefined): StartForm | undefined {
  const nodes = def?.nodes ?? []
  const start = nodes.find((n) => n.type === 'start')
  const own = formOf(start?.trigger?.form)
  if (own) return { schema: own, generated: false }
  const kind = start?.trigger?.kind
  if (kind && kind !== 'manual' && kind !== 'form') return undefined
  const fields = generatedFields(nodes, def?.edges ?? [])
  return fields.length ? { schema: { kind: 'components', fields }, generated: true } : undefined
}

type Candidate = Omit<FormField, 'id'> & { field: string; order: number; fromForm?: boolean }

function generatedFields(nodes: DefNode[], edges: DefEdge[]): FormField[] {
  const nodeIds = new Set(nodes.map((n) => n.id))
  // What approvers write: their forms' editable fields, and anything under their node's id.
  const written = new Set<string>()
  for (const n of nodes) {
    for (const f of componentFields(n.form)) if (f.field && !f.readonly) written.add(f.field)
  }
  const asked = (path: string) => {
    if (!isValidPath(path) || written.has(path)) return false
    const head = path.split('.')[0]
    return !nodeIds.has(head) && head !== 'error' && head !== 'initiator' && head !== 'item' && head !== 'index'
  }
  const found = new Map<string, Candidate>()
  let order = 0
  const add = (c: Omit<Candidate, 'order'>, strong: boolean) => {
    if (!asked(c.field)) return
    const have = found.get(c.field)
    if (!have) found.set(c.field, { ...c, order: order++ })
    else if (strong && !have.fromForm) found.set(c.field, { ...c, order: have.order, fromForm: true })
  }

  // 1. Approval forms: the read-only fields approvers look at, with their labels and types (the strongest hint).
  for (const n of nodes) {
    for (const f of componentFields(n.form)) {
      if (!f.field || !f.readonly || f.type === 'description') continue
      const { id: _id, readonly: _ro, ...rest } = f
      void _id
      void _ro
      add({ ...rest, field: f.field, required: f.type !== 'switch', fromForm: true }, true)
    }
  }
  // 2. Approvers and CC taken from the context: people.
  for (const n of nodes) {
    for (const a of [n.approvers, n.cc] as (Approvers | undefined)[]) {
      if (a?.context) add({ type: 'user', label: labelOf(a.context), field: a.context, multiple: true, required: true }, false)
    }
  }
  // 3. Edge conditions: the fields they test, typed by the values they are compared with.
  for (const e of edges) {
    if (e.condition) walkCondition(e.condition, (path, type, options) => add({ type, label: labelOf(path), field: path, required: type !== 'switch', ...(options ? { options } : {}) }, false))
  }
  return [...found.values()]
    .sort((a, b) => a.order - b.order)
    .map(({ order: _o, fromForm: _f, ...c }) => {
      void _o
      void _f
      return { id: c.field.replace(/[^A-Za-z0-9_-]/g, '_'), ...c }
    })
}

/** labelOf names a field found only by its path: its last part, words spaced ("cost_centre" → "cost centre"). */
function labelOf(path: string): string {
  return path.split('.').pop()!.replace(/[_-]+/g, ' ')
}

function componentFields(form: unknown): FormField[] {
  const f = formOf(form)
  return f?.kind === 'components' ? (f.fields ?? []) : []
}

const COMPARISONS = new Set(['$gt', '$gte', '$lt', '$lte'])

/** walkCondition calls found for each context path a MongoDB-style condition tests, with the field type its
 * comparison implies (number for $gt…, a switch for a boolean, a choice for $in of strings, else text). */
export function walkCondition(cond: unknown, found: (path: string, type: FieldType, options?: FieldOption[]) => void): void {
  if (!cond || typeof cond !== 'object' || Array.isArray(cond)) return
  for (const [k, v] of Object.entries(cond as Record<string, unknown>)) {
    if (k === '$and' || k === '$or' || k === '$nor') {
      if (Array.isArray(v)) v.forEach((c) => walkCondition(c, found))
      continue
    }
    if (k.startsWith('$')) continue
    const [type, options] = typeOfTest(v)
    found(k, type, options)
  }
}

function typeOfValue(v: unknown): FieldType {
  if (typeof v === 'number') return 'number'
  if (typeof v === 'boolean') return 'switch'
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v)) return 'date'
  return 'input'
}

function typeOfTest(v: unknown): [FieldType, FieldOption[]?] {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return [typeOfValue(v)]
  const ops = v as Record<string, unknown>
  for (const [op, x] of Object.entries(ops)) {
    if (COMPARISONS.has(op)) return [typeOfValue(x)]
    if ((op === '$in' || op === '$nin') && Array.isArray(x) && x.length && x.every((s) => typeof s === 'string')) {
      return ['select', (x as string[]).map((s) => ({ label: s, value: s }))]
    }
    if ((op === '$eq' || op === '$ne') && x !== null && typeof x !== 'object') return [typeOfValue(x)]
    if (op === '$not') return typeOfTest(x)
  }
  return ['input']
}
