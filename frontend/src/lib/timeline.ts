// An instance's history as a people's timeline: one entry per human act (started, approved, rejected, returned,
// resubmitted, transferred, added signers, withdrew, terminated, moved, took back, urged), each automatic decision
// with its reason, and the request's outcome. The engine's own steps (tasks created, steps activated, copies
// sent, timers, plugins) are folded into the entry they followed — an admin may unfold them. A field change reads
// "天数 5 → 3": the field's label from the process's forms, the values as the form shows them, never a path or JSON.
import type { HistoryItem } from '@/api'
import { displayValue, type FormField, type FormSchema } from './form'
import { localized } from './labels'

// i18n-ignore-start: history action codes, not message keys
/** What people do: each is an entry of its own. */
const HUMAN = new Set([
  'instance.started',
  'task.approved',
  'task.rejected',
  'task.transferred',
  'task.add_sign',
  'task.returned',
  'task.reclaimed',
  'task.urged',
  'instance.terminated',
  'instance.withdrawn',
  'instance.jumped',
  'instance.resubmitted',
])
/** What the engine decided on its own, with a reason: an entry of its own too. */
const AUTOMATIC = new Set(['task.auto_approved', 'task.auto_rejected', 'node.timeout_approved', 'node.timeout_rejected'])
/** How the request ended (or failed): an entry of its own. */
const OUTCOME = new Set(['instance.completed', 'instance.rejected', 'instance.failed', 'node.failed'])
// i18n-ignore-end

export interface FieldChange {
  label: string
  before: string
  after: string
}

export interface TimelineEntry {
  kind: 'act' | 'auto' | 'outcome'
  item: HistoryItem
  /** the request's field changes this act made (context.changed of the same task) */
  changes: FieldChange[]
  /** automatic decisions: why (no_approver, self_approval, dedupe, timeout…) */
  reason?: string
  /** the person the actor acted for (a delegation, an admin deciding for the assignee) */
  onBehalfOf?: string
  /** the engine's steps that followed this entry (folded) */
  engine: HistoryItem[]
}

type Data = Record<string, unknown>
const dataOf = (h: HistoryItem): Data => (h.data && typeof h.data === 'object' && !Array.isArray(h.data) ? (h.data as Data) : {})

/** fieldsByPath indexes the component fields of forms by their context path (the first form naming a path wins). */
export function fieldsByPath(forms: (FormSchema | undefined)[]): Map<string, FormField> {
  const out = new Map<string, FormField>()
  for (const f of forms) {
    if (f?.kind !== 'components') continue
    for (const x of f.fields ?? []) if (x.field && !out.has(x.field)) out.set(x.field, x)
  }
  return out
}

function parse(v: unknown): unknown {
  if (typeof v !== 'string') return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

/** changesOf turns a context.changed item's {path, before, after} list into labelled, readable changes. */
export function changesOf(h: HistoryItem, fields: Map<string, FormField>, label: (path: string) => string = (p) => p): FieldChange[] {
  const list = dataOf(h).changes
  if (!Array.isArray(list)) return []
  return list.map((c: { path?: string; before?: unknown; after?: unknown }) => {
    const path = String(c.path ?? '')
    const f = fields.get(path)
    return { label: (f && localized(f, 'label')) || label(path), before: displayValue(f, parse(c.before)), after: displayValue(f, parse(c.after)) }
  })
}

/** buildTimeline groups history items (oldest first) into entries. label names a path without a form field. */
export function buildTimeline(items: HistoryItem[], fields: Map<string, FormField> = new Map(), label?: (path: string) => string): { entries: TimelineEntry[]; before: HistoryItem[] } {
  const entries: TimelineEntry[] = []
  const before: HistoryItem[] = [] // engine steps before the first entry
  // Changes written before the decision they belong to, by task id, until that decision comes.
  const early = new Map<string, FieldChange[]>()
  for (const [i, h] of items.entries()) {
    // An applicant's resubmit or withdraw is recorded as their task's decision and then the request's move: one act.
    if ((h.action === 'task.approved' || h.action === 'task.rejected') && resubmitFollows(items, i)) { // i18n-ignore: history action codes
      if (h.task_id && early.has(h.task_id)) early.set(`next:${h.actor}`, early.get(h.task_id)!)
      continue
    }
    const kind = HUMAN.has(h.action) ? 'act' : AUTOMATIC.has(h.action) ? 'auto' : OUTCOME.has(h.action) ? 'outcome' : undefined
    if (h.action === 'context.changed') { // i18n-ignore: history action codes
      // The changes belong to the decision of the same task (written just before or after it).
      const owner = [...entries].reverse().find((e) => e.kind === 'act' && (!h.task_id || e.item.task_id === h.task_id))
      const changes = changesOf(h, fields, label)
      if (owner) owner.changes.push(...changes)
      else if (h.task_id) early.set(h.task_id, [...(early.get(h.task_id) ?? []), ...changes])
      else entries.push({ kind: 'act', item: h, changes, engine: [] })
      continue
    }
    if (kind) {
      const d = dataOf(h)
      const onBehalfOf = typeof d.on_behalf_of === 'string' ? d.on_behalf_of : typeof d.delegated_from === 'string' ? d.delegated_from : undefined
      const reason = kind === 'auto' ? (typeof d.reason === 'string' ? d.reason : h.action.startsWith('node.timeout') ? 'timeout' : undefined) : undefined // i18n-ignore: history action codes
      const changes = (h.task_id && early.get(h.task_id)) || early.get(`next:${h.actor}`) || []
      if (h.task_id) early.delete(h.task_id)
      early.delete(`next:${h.actor}`)
      entries.push({ kind, item: h, changes: [...changes], engine: [], ...(reason ? { reason } : {}), ...(onBehalfOf ? { onBehalfOf } : {}) })
      continue
    }
    const last = entries.at(-1)
    if (last) last.engine.push(h)
    else before.push(h)
  }
  // A failed node followed by the instance's failure reads as one outcome: keep the first.
  return { entries: entries.filter((e, i) => !(e.item.action === 'instance.failed' && entries[i - 1]?.item.action === 'node.failed')), before } // i18n-ignore: history action codes
}

/** resubmitFollows: the decision at i is followed, by the same person, by the request's resubmit or withdraw. */
function resubmitFollows(items: HistoryItem[], i: number): boolean {
  for (let j = i + 1; j < items.length; j++) {
    const x = items[j]
    if (x.action === 'instance.resubmitted' || x.action === 'instance.withdrawn') return x.actor === items[i].actor // i18n-ignore: history action codes
    if (HUMAN.has(x.action)) return false
  }
  return false
}

/** initials are what an avatar shows: the first letters of the first two words of a Latin name ("Bob Lead" → "BL"),
 * the first character of any other ("王 Bob" → "王"). */
export function initials(name: string): string {
  const n = name.trim()
  if (!n) return '?'
  if (!/^[A-Za-z]/.test(n)) return [...n][0]
  const words = n.split(/\s+/).filter((w) => /^[A-Za-z]/.test(w))
  return words
    .slice(0, 2)
    .map((w) => w[0].toUpperCase())
    .join('')
}
