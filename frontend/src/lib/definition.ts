// The process definition of API.md ("Definition"), as the designer edits it, and the rules that keep what the
// designer sends to the server clean: the server rejects unknown fields in a node, so every node is reduced to the
// fields its type owns before it leaves the browser. The types are generated from the definition's JSON Schema
// (src/generated/definition.ts), and so are the lists of node types and of the fields each type owns (lib/schema.ts).
import type {
  Approvers,
  Definition as SchemaDefinition,
  Edge,
  ErrorHandler,
  Node,
  Options,
  Trigger,
} from '@/generated/definition'
import { COMMON_FIELDS, NODE_TYPES, TRIGGER_FIELDS, TRIGGER_KINDS, TYPE_FIELDS, checkNodeId } from './schema'
import { t } from '@/i18n'
import { APPROVAL_RULE_FIELDS, cleanRuleApprovers, type RuleApprovers } from './approvalRules'

export { NODE_TYPES, RELATIONS, SIGN_MODES, TRIGGER_KINDS } from './schema'
export type { Approvers, ErrorHandler, Trigger }

export type DefNode = Node
export type DefEdge = Edge
export type NodeType = Node['type']
export type SignMode = NonNullable<Node['sign']>
export type TriggerKind = Trigger['kind']
export type OnTimeout = NonNullable<Node['on_timeout']>

/** Join is how a node with several incoming edges activates: "and" (default), "or", or {min: N}. */
export type Join = NonNullable<Node['join']>

/** joinMode names a join's kind. */
export function joinMode(j: Join | undefined): 'and' | 'or' | 'min' {
  if (j && typeof j === 'object') return 'min'
  return j === 'or' ? 'or' : 'and'
}

export interface Point {
  x: number
  y: number
}

/** DefinitionOptions are the settings of the whole definition (options.retention); settings the designer does not
 * know yet are kept as they came. */
export type DefinitionOptions = Options & Record<string, unknown>

/** Definition is a definition as the designer holds it: nodes and edges always there, positions beside them. */
export interface Definition extends Omit<SchemaDefinition, 'nodes' | 'edges' | 'options'> {
  nodes: DefNode[]
  edges: DefEdge[]
  options?: DefinitionOptions
  /** the designer's working copy of meta.layout: where each node sits on the canvas */
  layout?: Record<string, Point>
}

// A retention is a Go duration ("720h", "1h30m", "0" for ever), as the server parses it.
const RETENTION = /^(0|\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/

/** retentionValid: options.retention is empty (the deployment's setting) or a duration the server accepts. */
export function retentionValid(v: unknown): boolean {
  const r = String(v ?? '').trim()
  return r === '' || RETENTION.test(r)
}

/** layoutOf reads node positions from a definition: the working `layout`, else `meta.layout`. */
export function layoutOf(def: Definition): Record<string, Point> | undefined {
  if (def.layout && Object.keys(def.layout).length) return def.layout
  const l = def.meta?.layout
  return l && typeof l === 'object' && !Array.isArray(l) ? (l as Record<string, Point>) : undefined
}

// A node type's label and hint are messages (nodeType.<type>.label/hint), read when shown: they follow the language.
function nodeMeta(type: NodeType, color: string, icon: string) {
  return {
    get label() {
      return t(`nodeType.${type}.label`)
    },
    get hint() {
      return t(`nodeType.${type}.hint`)
    },
    color,
    icon,
  }
}

export const NODE_META: Record<NodeType, { label: string; hint: string; color: string; icon: string }> = {
  start: nodeMeta('start', '#2da44e', '▶'),
  approval: nodeMeta('approval', '#1f6feb', '✔'),
  auto: nodeMeta('auto', '#8250df', '⚙'),
  delay: nodeMeta('delay', '#bf8700', '◔'),
  callback: nodeMeta('callback', '#0969da', '↩'),
  subprocess: nodeMeta('subprocess', '#116329', '⧉'),
  error: nodeMeta('error', '#cf222e', '⚠'),
  end: nodeMeta('end', '#57606a', '■'),
  terminate: nodeMeta('terminate', '#a40e26', '✖'),
}

function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null || v === '') return true
  if (Array.isArray(v)) return v.length === 0
  if (typeof v === 'object') return Object.keys(v as object).length === 0
  return false
}

/** cleanApprovers drops empty members; returns undefined when nothing is left. */
export function cleanApprovers(a: Approvers | undefined): Approvers | undefined {
  if (!a) return undefined
  const out: Approvers = {}
  const users = (a.users ?? []).map((u) => u.trim()).filter(Boolean)
  const roles = (a.roles ?? []).map((r) => r.trim()).filter(Boolean)
  const groups = (a.groups ?? []).map((g) => g.map((u) => u.trim()).filter(Boolean)).filter((g) => g.length > 0)
  if (users.length) out.users = users
  if (roles.length) out.roles = roles
  if (a.context?.trim()) out.context = a.context.trim()
  if (a.relation) out.relation = a.relation
  if (groups.length) out.groups = groups
  if (a.groups_context?.trim()) out.groups_context = a.groups_context.trim()
  cleanRuleApprovers(a as RuleApprovers, out as RuleApprovers)
  return isEmpty(out) ? undefined : out
}

function cleanTrigger(t: Trigger | undefined): Trigger | undefined {
  if (!t) return undefined
  const kind: TriggerKind = TRIGGER_KINDS.includes(t.kind) ? t.kind : 'manual'
  const out: Trigger = { kind }
  for (const f of TRIGGER_FIELDS[kind]) {
    const v = t[f]
    if (!isEmpty(v) || (f === 'allow_repeated' && v === false) || (f === 'require_login' && v === false)) {
      ;(out as unknown as Record<string, unknown>)[f] = v
    }
  }
  return out
}

function cleanErrorHandler(h: ErrorHandler | undefined): ErrorHandler | undefined {
  if (!h || !h.operation) return undefined
  const out: ErrorHandler = { operation: h.operation }
  if (h.operation === 'retry') out.retry = { count: h.retry?.count ?? 3, period: h.retry?.period || '2s' }
  if (h.operation === 'catch') out.catch = { branch: h.catch?.branch ?? '' }
  return out
}

/**
 * cleanNode returns the node reduced to the fields its type owns, with empty values and defaults dropped, so the
 * server (which refuses unknown or foreign fields) sees exactly what the admin set.
 */
export function cleanNode(n: DefNode): DefNode {
  const out: DefNode = { id: n.id, type: n.type }
  const allowed = new Set<string>([...COMMON_FIELDS, ...(TYPE_FIELDS[n.type] ?? []), ...(n.type === 'approval' ? APPROVAL_RULE_FIELDS : [])])
  for (const [k, v] of Object.entries(n) as [keyof DefNode, unknown][]) {
    if (!allowed.has(k) || k === 'id' || k === 'type') continue
    switch (k) {
      case 'join':
        if (v === 'or') out.join = 'or'
        else if (v && typeof v === 'object' && Number.isInteger((v as { min?: number }).min)) out.join = { min: (v as { min: number }).min }
        break
      case 'is_ignore':
        if (v === true) out.is_ignore = true
        break
      case 'exclude_initiator' as keyof DefNode:
        if (v === true) (out as unknown as Record<string, unknown>).exclude_initiator = true
        break
      case 'on_no_approver' as keyof DefNode:
        if (v && v !== 'error') (out as unknown as Record<string, unknown>).on_no_approver = v
        break
      case 'timeout':
        if (v !== 0 && v !== '0' && !isEmpty(v)) out.timeout = v as string
        break
      case 'plugins': {
        const p = v as DefNode['plugins']
        const pre = (p?.pre ?? []).filter(Boolean)
        const after = (p?.after ?? []).filter(Boolean)
        if (pre.length || after.length) out.plugins = { pre, after }
        break
      }
      case 'cc':
      case 'approvers': {
        const a = cleanApprovers(v as Approvers)
        if (a) out[k] = a
        break
      }
      case 'trigger': {
        const t = cleanTrigger(v as Trigger)
        if (t) out.trigger = t
        break
      }
      case 'error_handler': {
        const h = cleanErrorHandler(v as ErrorHandler)
        if (h && h.operation !== 'throw') out.error_handler = h
        break
      }
      case 'pass_ratio':
        if (n.sign === 'vote' && typeof v === 'number') out.pass_ratio = v
        break
      case 'group_sign':
        if (v && (n.approvers?.groups?.length || n.approvers?.groups_context)) out.group_sign = v as SignMode
        break
      case 'i18n': {
        const l = cleanI18n(v)
        if (l) (out as unknown as Record<string, unknown>).i18n = l
        break
      }
      case 'on_timeout':
        if (typeof v === 'string' && v) out.on_timeout = v as OnTimeout
        else if (v && typeof v === 'object' && (v as { branch?: string }).branch) out.on_timeout = { branch: (v as { branch: string }).branch }
        break
      default:
        if (!isEmpty(v)) (out as unknown as Record<string, unknown>)[k] = v
    }
  }
  if (n.type === 'start' && !out.trigger) out.trigger = { kind: 'manual' }
  if (n.type === 'approval' && !out.sign) out.sign = 'or'
  return out
}

/** cleanI18n keeps the texts of an i18n object ({lang: {text: "..."}}) that are not blank, trimmed; undefined when
 * none is left. */
export function cleanI18n<T>(v: T): T | undefined {
  if (!v || typeof v !== 'object') return undefined
  const out: Record<string, Record<string, string>> = {}
  for (const [lang, texts] of Object.entries(v as Record<string, unknown>)) {
    if (!texts || typeof texts !== 'object') continue
    const kept: Record<string, string> = {}
    for (const [k, x] of Object.entries(texts as Record<string, unknown>)) {
      if (typeof x === 'string' && x.trim()) kept[k] = x.trim()
    }
    if (Object.keys(kept).length) out[lang] = kept
  }
  return Object.keys(out).length ? (out as T) : undefined
}

/** cleanEdge keeps id (when set), from, to, condition (when not empty) and default (when true). */
export function cleanEdge(e: DefEdge): DefEdge {
  const out: DefEdge = { from: e.from, to: e.to }
  if (e.id) out.id = e.id
  if (e.condition && Object.keys(e.condition).length > 0) out.condition = e.condition
  if (e.default) out.default = true
  if (e.meta && Object.keys(e.meta).length > 0) out.meta = e.meta
  return out
}

export interface CleanOptions {
  /** include the designer's `layout` (node positions) in the result */
  withLayout?: boolean
}

/** cleanDefinition is what the designer sends to POST /templates/validate, PUT .../draft and exports. */
export function cleanDefinition(def: Definition, opts: CleanOptions = {}): Definition {
  const out: Definition = { nodes: def.nodes.map(cleanNode), edges: def.edges.map(cleanEdge) }
  // Options travel as they came (other settings may be there), without empty values.
  const options: DefinitionOptions = {}
  for (const [k, v] of Object.entries(def.options ?? {})) {
    if (v !== undefined && v !== null && v !== '') options[k] = typeof v === 'string' ? v.trim() : v
  }
  if (Object.keys(options).length > 0) out.options = options
  // The title pattern and the labels per language (template name, description, title pattern), without blanks.
  const pattern = typeof def.title_pattern === 'string' ? def.title_pattern.trim() : ''
  if (pattern) out.title_pattern = pattern
  const labels = cleanI18n(def.i18n)
  if (labels) out.i18n = labels
  // meta is kept as it came (other editors may keep data there), except its layout, which is the designer's.
  const meta: Record<string, unknown> = { ...(def.meta ?? {}) }
  delete meta.layout
  const positions = layoutOf(def)
  if (opts.withLayout && positions && Object.keys(positions).length > 0) {
    const ids = new Set(def.nodes.map((n) => n.id))
    const layout: Record<string, Point> = {}
    for (const [id, p] of Object.entries(positions)) {
      if (ids.has(id)) layout[id] = { x: Math.round(p.x), y: Math.round(p.y) }
    }
    meta.layout = layout
  }
  if (Object.keys(meta).length > 0) out.meta = meta
  return out
}

/** newNodeId returns `<type>`, `<type>_2`, `<type>_3`... the first not in use. */
export function newNodeId(type: NodeType, existing: Iterable<string>): string {
  const used = new Set(existing)
  if (!used.has(type)) return type
  for (let i = 2; ; i++) {
    const id = `${type}_${i}`
    if (!used.has(id)) return id
  }
}

/** defaultNode is the node a palette drop creates: valid enough to show the admin what is missing. Its name is in
 * the admin's language (it is the template's data from then on). */
export function defaultNode(type: NodeType, id: string): DefNode {
  const name = NODE_META[type].label
  switch (type) {
    case 'start':
      return { id, type, name: t('nodeType.start.defaultName'), trigger: { kind: 'manual' } }
    case 'approval':
      return { id, type, name, approvers: {}, sign: 'or' }
    case 'delay':
      return { id, type, name, interval: 60 }
    case 'end':
      return { id, type, name }
    default:
      return { id, type, name }
  }
}

/** starterDefinition is what a new template begins with: a start wired to an end. */
export function starterDefinition(): Definition {
  return {
    nodes: [defaultNode('start', 'start'), defaultNode('end', 'end')],
    edges: [{ from: 'start', to: 'end' }],
    layout: { start: { x: 250, y: 40 }, end: { x: 250, y: 300 } },
  }
}

/**
 * renameNode changes a node id everywhere it is referenced: edges, layout, catch/timeout branches.
 * It returns an error message instead of renaming when the new id is empty or taken.
 */
export function renameNode(def: Definition, from: string, to: string): string | null {
  to = to.trim()
  const bad = checkNodeId(to)
  if (bad) return bad
  if (from === to) return null
  if (def.nodes.some((n) => n.id === to)) return t('definition.idTaken', { id: to })
  for (const n of def.nodes) {
    if (n.id === from) n.id = to
    if (n.timeout_branch === from) n.timeout_branch = to
    if (n.error_handler?.catch?.branch === from) n.error_handler.catch.branch = to
    if (n.on_timeout && typeof n.on_timeout === 'object' && n.on_timeout.branch === from) n.on_timeout = { branch: to }
  }
  for (const e of def.edges) {
    if (e.from === from) e.from = to
    if (e.to === from) e.to = to
  }
  const layout = layoutOf(def)
  if (layout?.[from]) {
    layout[to] = layout[from]
    delete layout[from]
  }
  return null
}

/** parseDefinition checks an imported JSON text has the definition's shape; it throws a readable Error if not. */
export function parseDefinition(text: string): Definition {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch (e) {
    throw new Error(t('definition.notJson', { message: (e as Error).message }), { cause: e })
  }
  // Accept a whole template or version object too, as exported by the API.
  if (v && typeof v === 'object' && 'definition' in v) v = (v as { definition: unknown }).definition
  if (!v || typeof v !== 'object') throw new Error(t('definition.notObject'))
  const d = v as Partial<Definition>
  if (!Array.isArray(d.nodes)) throw new Error(t('definition.notArray', { field: 'nodes' }))
  if (d.edges !== undefined && !Array.isArray(d.edges)) throw new Error(t('definition.notArray', { field: 'edges' }))
  d.nodes.forEach((n, i) => {
    if (!n || typeof n !== 'object') throw new Error(t('definition.nodeNotObject', { i }))
    if (typeof n.id !== 'string' || !n.id) throw new Error(t('definition.nodeNoId', { i }))
    if (!NODE_TYPES.includes(n.type)) throw new Error(t('definition.nodeBadType', { i, id: n.id, type: String(n.type) }))
  })
  ;(d.edges ?? []).forEach((e, i) => {
    if (!e || typeof e.from !== 'string' || typeof e.to !== 'string') throw new Error(t('definition.edgeEnds', { i }))
  })
  if (d.meta !== undefined && (typeof d.meta !== 'object' || d.meta === null || Array.isArray(d.meta))) throw new Error(t('definition.metaNotObject'))
  if (d.options !== undefined && (typeof d.options !== 'object' || d.options === null || Array.isArray(d.options))) throw new Error(t('definition.optionsNotObject'))
  return { nodes: d.nodes, edges: d.edges ?? [], options: d.options, meta: d.meta, layout: d.layout }
}
