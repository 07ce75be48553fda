// The business designer's model (DingTalk style): a definition read as a vertical chain from the start to an end,
// with condition and parallel branches side by side, and written back. Kept free of Vue so it can be tested alone.
//
// A chain is a list of items: a node, a block (the branches leaving the node before it and meeting again at the
// node after it) or a "goto" (the chain goes on at a node shown elsewhere). A block's branch is the edge leaving
// the split node (its condition or default flag) and the chain of items on it; an empty branch is an edge straight
// from the split to the join. Nodes nobody reaches through an edge (the error node, a callback's timeout branch,
// a catch branch) start side chains. parseFlow reads a definition; compileFlow writes one; a definition is shown
// only when writing back what was read gives it again (same nodes, same edges), so the builder never loses
// anything: otherwise parseFlow says why and the canvas is the place to edit it.
import { clone } from './clone'
import { defaultNode, newNodeId, type DefEdge, type DefNode, type Definition } from './definition'
import { t } from '@/i18n'

export type Condition = Record<string, unknown>

/** EdgeAttrs are what a branch's first edge says: its condition, or that it is the default ("otherwise"). */
export interface EdgeAttrs {
  condition?: Condition
  default?: boolean
}

export interface NodeItem {
  kind: 'node'
  id: string
}
export interface GotoItem {
  kind: 'goto'
  id: string
}
export interface Branch {
  /** the edge leaving the split into this branch; none for a branch that splits again at once (shares the split) */
  edge?: EdgeAttrs
  items: Item[]
}
export interface BlockItem {
  kind: 'block'
  /** condition: some branch has a condition or is the default; parallel: every branch is taken */
  mode: 'condition' | 'parallel'
  branches: Branch[]
}
export type Item = NodeItem | GotoItem | BlockItem

export interface SideChain {
  root: string
  items: Item[]
}

/** Flow is a definition as the business designer shows it. */
export interface Flow {
  main: Item[]
  side: SideChain[]
  /** every node by id */
  nodes: Record<string, DefNode>
  /** the definition's own node and edge order, kept when written back */
  nodeOrder: string[]
  edgeOrder: string[]
  /** an edge's id and meta, by `from→to`: they travel along while the edge stays */
  edgeExtras: Record<string, Pick<DefEdge, 'id' | 'meta'>>
  /** the rest of the definition (options, meta, layout), as it came */
  rest: Omit<Definition, 'nodes' | 'edges'>
}

export type ParseResult = { ok: true; flow: Flow } | { ok: false; reason: string }

const EXIT = '\u0000exit'
const key = (from: string, to: string) => `${from}\u2192${to}`

function attrsOf(e: DefEdge): EdgeAttrs | undefined {
  const a: EdgeAttrs = {}
  if (e.condition && Object.keys(e.condition).length) a.condition = e.condition as Condition
  if (e.default) a.default = true
  return a.condition || a.default ? a : undefined
}

const hasAttrs = (a?: EdgeAttrs) => !!a && (!!a.default || (!!a.condition && Object.keys(a.condition).length > 0))

class NotShown extends Error {}

/** parseFlow reads a definition as a chain of items, or says why it cannot. */
export function parseFlow(def: Definition): ParseResult {
  try {
    const flow = read(def)
    let back: Definition
    try {
      back = compileFlow(flow)
    } catch (e) {
      return { ok: false, reason: (e as Error).message }
    }
    if (!sameGraph(back, def)) return { ok: false, reason: t('builder.reason.cross') }
    return { ok: true, flow }
  } catch (e) {
    if (e instanceof NotShown) return { ok: false, reason: e.message }
    throw e
  }
}

function read(def: Definition): Flow {
  const nodes: Record<string, DefNode> = {}
  for (const n of def.nodes) {
    if (nodes[n.id]) throw new NotShown(t('builder.reason.duplicate', { id: n.id }))
    nodes[n.id] = n
  }
  const start = def.nodes.find((n) => n.type === 'start')
  if (!start) throw new NotShown(t('builder.reason.noStart'))
  const succ = new Map<string, DefEdge[]>()
  const indeg = new Map<string, number>()
  for (const n of def.nodes) {
    succ.set(n.id, [])
    indeg.set(n.id, 0)
  }
  const edgeExtras: Flow['edgeExtras'] = {}
  for (const e of def.edges) {
    if (!nodes[e.from] || !nodes[e.to]) throw new NotShown(t('builder.reason.dangling', { from: e.from, to: e.to }))
    succ.get(e.from)!.push(e)
    indeg.set(e.to, indeg.get(e.to)! + 1)
    const x: Pick<DefEdge, 'id' | 'meta'> = {}
    if (e.id) x.id = e.id
    if (e.meta && Object.keys(e.meta).length) x.meta = e.meta
    if (x.id || x.meta) edgeExtras[key(e.from, e.to)] = x
  }
  const pdom = postDominators(def.nodes.map((n) => n.id), succ)
  const visited = new Set<string>()

  // nearest is the nearest node every path from all the given nodes goes through (EXIT when they never meet).
  function nearest(ids: string[]): string {
    const common = intersect(ids.map((id) => pdom.get(id)!))
    let best = EXIT
    let size = -1
    for (const c of common) {
      const s = pdom.get(c)?.size ?? 0
      if (c !== EXIT && s > size) {
        best = c
        size = s
      }
    }
    return best
  }

  // region: the nodes reachable from id before stop.
  function region(id: string, stop: string): Set<string> {
    const out = new Set<string>()
    const todo = [id]
    while (todo.length) {
      const x = todo.pop()!
      if (x === stop || out.has(x)) continue
      out.add(x)
      for (const e of succ.get(x) ?? []) todo.push(e.to)
    }
    return out
  }

  function chain(first: string, stop: string, side: boolean): Item[] {
    const items: Item[] = []
    let u = first
    for (;;) {
      if (u === stop) return items
      if (visited.has(u)) {
        if (side) {
          items.push({ kind: 'goto', id: u })
          return items
        }
        throw new NotShown(t('builder.reason.cross'))
      }
      visited.add(u)
      items.push({ kind: 'node', id: u })
      const out = succ.get(u)!
      if (out.length === 0) {
        if (stop !== EXIT) throw new NotShown(t('builder.reason.cross'))
        return items
      }
      if (out.length === 1 && !attrsOf(out[0])) {
        u = out[0].to
        continue
      }
      const b = block(u, out, stop, side)
      items.push(b.item)
      if (b.join === EXIT) return items
      u = b.join
    }
  }

  function block(split: string, out: DefEdge[], stop: string, side: boolean): { item: BlockItem; join: string } {
    let join = nearest(out.map((e) => e.to))
    // A join beyond the chain's own end belongs to an outer block: this block's branches end at that end.
    if (stop !== EXIT && join !== stop && !pdom.get(join)?.has(stop) && join !== EXIT) throw new NotShown(t('builder.reason.cross'))
    if (stop !== EXIT && (join === EXIT || pdom.get(stop)?.has(join))) join = stop
    // Group the edges whose branches meet before the join: they form a branch that splits again at once.
    const regions = out.map((e) => region(e.to, join))
    const group = out.map((_, i) => i)
    const find = (i: number): number => (group[i] === i ? i : (group[i] = find(group[i])))
    for (let i = 0; i < out.length; i++) {
      for (let j = i + 1; j < out.length; j++) {
        if ([...regions[i]].some((x) => regions[j].has(x))) group[find(i)] = find(j)
      }
    }
    const groups = new Map<number, number[]>()
    out.forEach((_, i) => {
      const g = find(i)
      if (!groups.has(g)) groups.set(g, [])
      groups.get(g)!.push(i)
    })
    const branches: Branch[] = []
    for (const members of groups.values()) {
      if (members.length === 1) {
        const e = out[members[0]]
        const br: Branch = { items: e.to === join ? [] : chain(e.to, join, side) }
        const a = attrsOf(e)
        if (a) br.edge = a
        branches.push(br)
        continue
      }
      if (members.length === out.length) throw new NotShown(t('builder.reason.cross'))
      const inner = block(split, members.map((i) => out[i]), join, side)
      const items: Item[] = [inner.item]
      if (inner.join !== join) items.push(...chain(inner.join, join, side))
      branches.push({ items })
    }
    const mode = out.some((e) => attrsOf(e)) ? 'condition' : 'parallel'
    // the default ("otherwise") is shown last, whatever the order of the edges
    branches.sort((a, b) => Number(!!a.edge?.default) - Number(!!b.edge?.default))
    return { item: { kind: 'block', mode, branches }, join }
  }

  const main = chain(start.id, EXIT, false)
  const side: SideChain[] = []
  for (const n of def.nodes) {
    if (n.id === start.id || indeg.get(n.id)! > 0 || visited.has(n.id)) continue
    side.push({ root: n.id, items: chain(n.id, EXIT, true) })
  }
  const missed = def.nodes.find((n) => !visited.has(n.id))
  if (missed) throw new NotShown(t('builder.reason.loop', { id: missed.id }))
  const { nodes: _n, edges: _e, ...rest } = def
  return {
    main,
    side,
    nodes,
    nodeOrder: def.nodes.map((n) => n.id),
    edgeOrder: def.edges.map((e) => key(e.from, e.to)),
    edgeExtras,
    rest,
  }
}

function intersect(sets: Set<string>[]): Set<string> {
  const [first, ...rest] = sets
  return new Set([...(first ?? [])].filter((x) => rest.every((s) => s.has(x))))
}

/** postDominators gives each node the set of nodes every path from it to an end goes through (itself included). */
function postDominators(ids: string[], succ: Map<string, DefEdge[]>): Map<string, Set<string>> {
  const pd = new Map<string, Set<string>>()
  pd.set(EXIT, new Set([EXIT]))
  const state = new Map<string, 0 | 1 | 2>()
  const visit = (id: string) => {
    const s = state.get(id)
    if (s === 2) return
    if (s === 1) throw new NotShown(t('builder.reason.loop', { id }))
    state.set(id, 1)
    const out = succ.get(id)!
    for (const e of out) visit(e.to)
    const common = out.length === 0 ? new Set([EXIT]) : intersect(out.map((e) => pd.get(e.to)!))
    common.add(id)
    pd.set(id, common)
    state.set(id, 2)
  }
  for (const id of ids) visit(id)
  return pd
}

type Port = { from: string; attrs?: EdgeAttrs; branch?: Branch }

/** compileFlow writes the flow back as a definition: its nodes and edges in their first order, new ones after.
 * branchEdges, when given, learns which edge each branch starts with. It throws (a readable Error) when the flow
 * would need two edges between the same nodes (two empty branches) or a block has no node to split at. */
export function compileFlow(flow: Flow, branchEdges?: Map<Branch, { from: string; to: string }>): Definition {
  const edges: DefEdge[] = []
  const used = new Set<string>()
  const edge = (p: Port, to: string) => {
    const k = key(p.from, to)
    if (used.has(k)) throw new Error(t('builder.twoEdges', { from: name(flow, p.from), to: name(flow, to) }))
    used.add(k)
    if (p.branch) branchEdges?.set(p.branch, { from: p.from, to })
    const e: DefEdge = { from: p.from, to }
    const x = flow.edgeExtras[k]
    if (x?.id) e.id = x.id
    if (p.attrs?.condition && Object.keys(p.attrs.condition).length) e.condition = clone(p.attrs.condition)
    if (p.attrs?.default) e.default = true
    if (x?.meta) e.meta = clone(x.meta)
    // The schema's field order: id, from, to, condition, default, meta.
    edges.push(e.id ? { id: e.id, ...e } : e)
  }
  const chain = (items: Item[], ports: Port[]): Port[] => {
    for (const it of items) {
      if (it.kind === 'node' || it.kind === 'goto') {
        for (const p of ports) edge(p, it.id)
        ports = it.kind === 'goto' ? [] : [{ from: it.id }]
        continue
      }
      if (ports.length !== 1 || hasAttrs(ports[0].attrs)) throw new Error(t('builder.needSplit'))
      const split = ports[0].from
      const next: Port[] = []
      for (const br of it.branches) next.push(...chain(br.items, [{ from: split, attrs: br.edge, branch: br }]))
      ports = next
    }
    return ports
  }
  chain(flow.main, [])
  for (const s of flow.side) chain(s.items, [])
  const ids = new Set<string>()
  collect(flow.main, ids)
  for (const s of flow.side) collect(s.items, ids)
  const order = [...flow.nodeOrder.filter((id) => ids.has(id)), ...[...ids].filter((id) => !flow.nodeOrder.includes(id))]
  const rank = new Map(flow.edgeOrder.map((k, i) => [k, i]))
  const sorted = edges
    .map((e, i) => ({ e, i, r: rank.get(key(e.from, e.to)) ?? flow.edgeOrder.length + i }))
    .sort((a, b) => a.r - b.r)
    .map((x) => x.e)
  const out: Definition = { ...clone(flow.rest), nodes: order.map((id) => flow.nodes[id]), edges: sorted }
  const layout = out.layout
  if (layout) for (const id of Object.keys(layout)) if (!ids.has(id)) delete layout[id]
  return out
}

function collect(items: Item[], ids: Set<string>) {
  for (const it of items) {
    if (it.kind === 'node') ids.add(it.id)
    else if (it.kind === 'block') for (const b of it.branches) collect(b.items, ids)
  }
}

function name(flow: Flow, id: string): string {
  return flow.nodes[id]?.name || id
}

function canon(e: DefEdge): string {
  return JSON.stringify([e.from, e.to, e.id ?? null, e.condition ?? null, !!e.default, e.meta ?? null])
}

/** sameGraph: the same nodes (deep, in any order) and the same edges. */
function sameGraph(a: Definition, b: Definition): boolean {
  if (a.nodes.length !== b.nodes.length || a.edges.length !== b.edges.length) return false
  const ids = new Set(a.nodes.map((n) => n.id))
  if (!b.nodes.every((n) => ids.has(n.id))) return false
  const ea = a.edges.map(canon).sort()
  const eb = b.edges.map(canon).sort()
  return ea.every((x, i) => x === eb[i])
}

// ---- editing ----

/** A place in the flow: a chain (the main one, or a side chain) and the branches down to the chain edited. */
export type ChainPath = { side?: number; steps: [item: number, branch: number][] }

export function chainAt(flow: Flow, path: ChainPath): Item[] {
  let items = path.side === undefined ? flow.main : flow.side[path.side].items
  for (const [i, b] of path.steps) {
    const it = items[i]
    if (it?.kind !== 'block') throw new Error('bad path') // i18n-ignore: a programming error
    items = it.branches[b].items
  }
  return items
}

/** What the + between two steps inserts. */
export type Insertable = 'approval' | 'cc' | 'auto' | 'delay' | 'condition' | 'parallel'
export const INSERTABLE: Insertable[] = ['approval', 'cc', 'auto', 'delay', 'condition', 'parallel']

function newNode(flow: Flow, kind: 'approval' | 'cc' | 'auto' | 'delay'): string {
  const type = kind === 'cc' ? 'auto' : kind
  const id = newNodeId(kind === 'cc' ? ('cc' as never) : type, Object.keys(flow.nodes))
  const n = defaultNode(type, id)
  if (kind === 'cc') {
    n.name = t('builder.insert.cc')
    n.meta = { builder: 'cc' }
  }
  flow.nodes[id] = n
  return id
}

/** isCcStep: an automatic step that only copies people (the builder's CC step). */
export function isCcStep(n: DefNode): boolean {
  if (n.type !== 'auto') return false
  if ((n.meta as { builder?: string } | undefined)?.builder === 'cc') return true
  return !!n.cc && !n.plugins?.pre?.length && !n.plugins?.after?.length
}

/** insert puts a new step at index of the chain at path; it returns the new flow and the node to select. */
export function insert(flow: Flow, path: ChainPath, index: number, what: Insertable): { flow: Flow; select?: string } {
  const f = clone(flow)
  const items = chainAt(f, path)
  let select: string | undefined
  if (what === 'condition' || what === 'parallel') {
    // A block splits at the node before it: first in a branch, or after another block, a junction is that node.
    if (index === 0 || items[index - 1].kind !== 'node') {
      items.splice(index, 0, { kind: 'node', id: junction(f) })
      index++
    }
    const a = newNode(f, 'approval')
    const block: BlockItem =
      what === 'condition'
        ? { kind: 'block', mode: 'condition', branches: [{ edge: { condition: {} }, items: [{ kind: 'node', id: a }] }, { edge: { default: true }, items: [] }] }
        : { kind: 'block', mode: 'parallel', branches: [{ items: [{ kind: 'node', id: a }] }, { items: [{ kind: 'node', id: newNode(f, 'approval') }] }] }
    items.splice(index, 0, block)
    if (items[index + 1]?.kind === 'block') items.splice(index + 1, 0, { kind: 'node', id: junction(f) })
    select = a
  } else {
    select = newNode(f, what)
    items.splice(index, 0, { kind: 'node', id: select })
  }
  normalize(f)
  return { flow: f, select }
}

/** addBranch adds a branch with a new approval to the block at index of the chain at path (before the default). */
export function addBranch(flow: Flow, path: ChainPath, index: number): { flow: Flow; select: string } {
  const f = clone(flow)
  const b = chainAt(f, path)[index] as BlockItem
  const id = newNode(f, 'approval')
  const br: Branch = b.mode === 'condition' ? { edge: { condition: {} }, items: [{ kind: 'node', id }] } : { items: [{ kind: 'node', id }] }
  const def = b.branches.findIndex((x) => x.edge?.default)
  if (def >= 0) b.branches.splice(def, 0, br)
  else b.branches.push(br)
  return { flow: f, select: id }
}

/** removeBranch drops a branch and its steps; a block left with one branch becomes that branch's steps. */
export function removeBranch(flow: Flow, path: ChainPath, index: number, branch: number): Flow {
  const f = clone(flow)
  const items = chainAt(f, path)
  const b = items[index] as BlockItem
  const [gone] = b.branches.splice(branch, 1)
  forget(f, gone.items)
  if (b.branches.length === 1) items.splice(index, 1, ...b.branches[0].items)
  normalize(f)
  return f
}

/** canRemove: start, the ends and the error node stay (the canvas removes them). */
export function canRemove(flow: Flow, id: string): boolean {
  const n = flow.nodes[id]
  return !!n && !['start', 'end', 'terminate', 'error'].includes(n.type)
}

/** removeItem drops a node (its neighbours joined) or a whole block with its branches. */
export function removeItem(flow: Flow, path: ChainPath, index: number): Flow {
  const f = clone(flow)
  const items = chainAt(f, path)
  const [gone] = items.splice(index, 1)
  forget(f, [gone])
  normalize(f)
  return f
}

function forget(f: Flow, items: Item[]) {
  const ids = new Set<string>()
  collect(items, ids)
  for (const id of ids) delete f.nodes[id]
}

function junction(f: Flow): string {
  const id = newNodeId('auto', Object.keys(f.nodes))
  f.nodes[id] = { ...defaultNode('auto', id), name: t('builder.junction') }
  return id
}

/** normalize puts a plain junction (an automatic step without plugins) where a block has no single node to split
 * at: after another block, or first in a branch that has a condition. */
function normalize(f: Flow) {
  const fix = (items: Item[], branchEdge: EdgeAttrs | undefined, top: boolean) => {
    for (let i = 0; i < items.length; i++) {
      const it = items[i]
      if (it.kind !== 'block') continue
      const prev = items[i - 1]
      const needs = i === 0 ? top || hasAttrs(branchEdge) : prev.kind !== 'node'
      if (needs) {
        items.splice(i, 0, { kind: 'node', id: junction(f) })
        i++
      }
      for (const b of it.branches) fix(b.items, b.edge, false)
    }
  }
  fix(f.main, undefined, true)
  for (const s of f.side) fix(s.items, undefined, true)
}
