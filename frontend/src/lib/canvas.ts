// The mapping between a process definition (API.md) and the designer's canvas (Vue Flow nodes and edges).
// Kept free of Vue so it can be tested on its own: definition → canvas when a draft or version is opened,
// canvas → definition whenever the admin changes something (validation, save, export).
import { clone } from './clone'
import { readableCondition, type ReadableField } from './conditionText'
import { parseFlow, type Item } from './builder'
import { t } from '@/i18n'
import { conditionFields } from './conditionBuilder'
import { NODE_META, layoutOf, type DefEdge, type DefNode, type Definition, type Point } from './definition'

/** CanvasNode has the shape of a Vue Flow node; `data.node` is the definition node without its id. */
export interface CanvasNode {
  id: string
  type: 'halley'
  position: Point
  data: { node: DefNode }
}

/** CanvasEdge has the shape of a Vue Flow edge; `data.edge` keeps condition, default and any explicit id. */
export interface CanvasEdge {
  id: string
  source: string
  target: string
  type?: string
  label?: string
  data: { edge: DefEdge; virtual?: boolean }
}

export interface CanvasGraph {
  nodes: CanvasNode[]
  edges: CanvasEdge[]
  /** edges of the definition that name a node it does not have: they cannot be drawn, the admin is told */
  dropped: DefEdge[]
}

export const LAYOUT = { colGap: 230, rowGap: 140, originX: 40, originY: 40 }

/**
 * autoLayout places nodes top to bottom. A definition the business designer can show is laid out as it shows it:
 * a chain in one column, the branches of a block side by side (an empty branch keeps a column of its own, so the
 * edge straight to the join never runs under the other branch's steps), the side chains (error node, timeout
 * branches) to the right. Any other is laid out in layers (layeredLayout).
 */
export function autoLayout(def: Pick<Definition, 'nodes' | 'edges'>): Record<string, Point> {
  return treeLayout(def) ?? layeredLayout(def)
}

/** treeLayout lays out a definition as the business designer reads it; null when it cannot read it. */
export function treeLayout(def: Pick<Definition, 'nodes' | 'edges'>): Record<string, Point> | null {
  const r = parseFlow({ nodes: def.nodes, edges: def.edges })
  if (!r.ok) return null
  const size = new Map<Item[], { w: number; h: number }>()
  const measure = (items: Item[]): { w: number; h: number } => {
    let w = 1
    let h = 0
    for (const it of items) {
      if (it.kind === 'node') h += 1
      else if (it.kind === 'block') {
        let bw = 0
        let bh = 0
        for (const b of it.branches) {
          const m = b.items.length ? measure(b.items) : { w: 1, h: 0 }
          bw += m.w
          bh = Math.max(bh, m.h)
        }
        w = Math.max(w, bw)
        h += bh
      }
    }
    const m = { w, h }
    size.set(items, m)
    return m
  }
  const pos: Record<string, Point> = {}
  const place = (items: Item[], cx: number, row: number): number => {
    for (const it of items) {
      if (it.kind === 'node') {
        pos[it.id] = { x: LAYOUT.originX + cx * LAYOUT.colGap, y: LAYOUT.originY + row * LAYOUT.rowGap }
        row += 1
      } else if (it.kind === 'block') {
        const widths = it.branches.map((b) => (b.items.length ? size.get(b.items)!.w : 1))
        let left = cx - (widths.reduce((a, b) => a + b, 0) - 1) / 2 - 0.5
        let bottom = row
        it.branches.forEach((b, i) => {
          const c = left + widths[i] / 2
          bottom = Math.max(bottom, place(b.items, c, row))
          left += widths[i]
        })
        row = bottom
      }
    }
    return row
  }
  const main = measure(r.flow.main)
  place(r.flow.main, (main.w - 1) / 2, 0)
  let x = main.w
  for (const s of r.flow.side) {
    const m = measure(s.items)
    place(s.items, x + (m.w - 1) / 2 + 0.25, 0)
    x += m.w + 0.25
  }
  for (const p of Object.values(pos)) p.x = Math.round(p.x)
  return pos
}

/**
 * layeredLayout places nodes in layers, top to bottom: a node's layer is the length of the longest path to it from
 * a node without incoming edges (edges that close a cycle are ignored), and the nodes of a layer are spread
 * left to right, centred on the widest layer.
 */
export function layeredLayout(def: Pick<Definition, 'nodes' | 'edges'>): Record<string, Point> {
  const ids = def.nodes.map((n) => n.id)
  const known = new Set(ids)
  const out = new Map<string, string[]>()
  const indeg = new Map<string, number>()
  for (const id of ids) {
    out.set(id, [])
    indeg.set(id, 0)
  }
  for (const e of def.edges) {
    if (!known.has(e.from) || !known.has(e.to) || e.from === e.to) continue
    out.get(e.from)!.push(e.to)
    indeg.set(e.to, indeg.get(e.to)! + 1)
  }
  const layer = new Map<string, number>()
  const queue: string[] = []
  for (const id of ids) {
    if (indeg.get(id) === 0) {
      queue.push(id)
      layer.set(id, 0)
    }
  }
  // Kahn's algorithm, carrying the longest distance.
  const remaining = new Map(indeg)
  while (queue.length > 0) {
    const id = queue.shift()!
    for (const to of out.get(id)!) {
      layer.set(to, Math.max(layer.get(to) ?? 0, layer.get(id)! + 1))
      remaining.set(to, remaining.get(to)! - 1)
      if (remaining.get(to) === 0) queue.push(to)
    }
  }
  // Nodes on a cycle never reach in-degree 0: put each after the deepest layer it was seen at (or 0).
  let maxLayer = 0
  for (const l of layer.values()) maxLayer = Math.max(maxLayer, l)
  for (const id of ids) {
    if (remaining.get(id)! > 0) layer.set(id, (layer.get(id) ?? maxLayer) + 1)
  }
  const rows = new Map<number, string[]>()
  for (const id of ids) {
    const l = layer.get(id) ?? 0
    if (!rows.has(l)) rows.set(l, [])
    rows.get(l)!.push(id)
  }
  const widest = Math.max(1, ...[...rows.values()].map((r) => r.length))
  const pos: Record<string, Point> = {}
  for (const [l, row] of rows) {
    const offset = ((widest - row.length) * LAYOUT.colGap) / 2
    row.forEach((id, i) => {
      pos[id] = { x: LAYOUT.originX + offset + i * LAYOUT.colGap, y: LAYOUT.originY + l * LAYOUT.rowGap }
    })
  }
  return pos
}

/** conditionLabel is the short text drawn on an edge: its condition as people read it (the forms' labels). */
export function conditionLabel(e: DefEdge, fields: ReadableField[] = []): string | undefined {
  const parts: string[] = []
  if (e.default) parts.push(t('diagram.edge.default'))
  const s = readableCondition(e.condition, fields)
  if (s) parts.push([...s].length > 48 ? [...s].slice(0, 47).join('') + '…' : s)
  return parts.length ? parts.join(' · ') : undefined
}

/** canvasEdgeId gives an edge its explicit id, else one derived from its ends and position in the list. */
export function canvasEdgeId(e: DefEdge, index: number): string {
  return e.id ? e.id : `e${index}:${e.from}->${e.to}`
}

/** definitionToCanvas lays out a definition for the designer; positions come from its layout when it has them. */
export function definitionToCanvas(def: Definition): CanvasGraph {
  const layout = layoutOf(def)
  const needLayout = def.nodes.some((n) => !layout?.[n.id])
  const auto = needLayout ? autoLayout(def) : {}
  const nodes: CanvasNode[] = def.nodes.map((n) => ({
    id: n.id,
    type: 'halley',
    position: { ...(layout?.[n.id] ?? auto[n.id] ?? { x: 0, y: 0 }) },
    data: { node: clone(n) },
  }))
  const ids = new Set(def.nodes.map((n) => n.id))
  const fields = conditionFields(def.nodes)
  const edges: CanvasEdge[] = []
  const dropped: DefEdge[] = []
  def.edges.forEach((e, i) => {
    if (!ids.has(e.from) || !ids.has(e.to)) {
      dropped.push(e)
      return
    }
    edges.push({
      id: canvasEdgeId(e, i),
      source: e.from,
      target: e.to,
      type: 'routed',
      label: conditionLabel(e, fields),
      data: { edge: clone(e) },
    })
  })
  edges.push(...branchEdges(def))
  return { nodes, edges, dropped }
}

/**
 * branchEdges are the dashed arrows to the nodes a node leaves through without an edge — a callback's
 * timeout_branch, an approval's on_timeout branch, an error handler's catch branch — drawn so their targets do not
 * float unconnected. They are not edges of the definition: not selectable, not saved.
 */
export function branchEdges(def: Pick<Definition, 'nodes'>): CanvasEdge[] {
  const ids = new Set(def.nodes.map((n) => n.id))
  const out: CanvasEdge[] = []
  const add = (from: string, to: string | undefined, label: string) => {
    if (!to || !ids.has(to)) return
    out.push({ id: `branch:${from}->${to}`, source: from, target: to, type: 'routed', label, data: { edge: { from, to }, virtual: true } } as CanvasEdge)
  }
  for (const n of def.nodes) {
    add(n.id, n.timeout_branch, t('diagram.edge.timeout'))
    if (n.on_timeout && typeof n.on_timeout === 'object') add(n.id, n.on_timeout.branch, t('diagram.edge.onTimeout'))
    add(n.id, n.error_handler?.operation === 'catch' ? n.error_handler.catch?.branch : undefined, t('diagram.edge.onError'))
  }
  return out
}

/**
 * canvasToDefinition reads the canvas back: node order and edge order as on the canvas, the node id from the canvas
 * node (authoritative), edge ends from source/target, and every position into `layout`.
 */
export function canvasToDefinition(nodes: Pick<CanvasNode, 'id' | 'position' | 'data'>[], edges: Pick<CanvasEdge, 'source' | 'target' | 'data'>[]): Definition {
  const layout: Record<string, Point> = {}
  const defNodes: DefNode[] = nodes.map((cn) => {
    layout[cn.id] = { x: Math.round(cn.position.x), y: Math.round(cn.position.y) }
    return { ...clone(cn.data.node), id: cn.id }
  })
  const defEdges: DefEdge[] = edges.filter((ce) => !(ce.data as { virtual?: boolean } | undefined)?.virtual).map((ce) => {
    const e: DefEdge = { ...clone(ce.data?.edge ?? { from: ce.source, to: ce.target }), from: ce.source, to: ce.target }
    return e
  })
  return { nodes: defNodes, edges: defEdges, layout }
}

/** canConnect says why an edge may not be drawn between two nodes, or null when it may. */
export function canConnect(def: Pick<Definition, 'nodes' | 'edges'>, from: string, to: string): string | null {
  if (from === to) return t('canvas.itself')
  const src = def.nodes.find((n) => n.id === from)
  const dst = def.nodes.find((n) => n.id === to)
  if (!src || !dst) return t('canvas.bothEnds')
  if (dst.type === 'start') return t('canvas.intoStart')
  if (dst.type === 'error') return t('canvas.intoError')
  if (src.type === 'end' || src.type === 'terminate') return t('canvas.outOfEnd', { type: NODE_META[src.type].label })
  if (def.edges.some((e) => e.from === from && e.to === to)) return t('canvas.already')
  return null
}
