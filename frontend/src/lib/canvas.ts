// The mapping between a process definition (API.md) and the designer's canvas (Vue Flow nodes and edges).
// Kept free of Vue so it can be tested on its own: definition → canvas when a draft or version is opened,
// canvas → definition whenever the admin changes something (validation, save, export).
import { clone } from './clone'
import { conditionText } from './conditionText'
import { t } from '@/i18n'
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
  data: { edge: DefEdge }
}

export interface CanvasGraph {
  nodes: CanvasNode[]
  edges: CanvasEdge[]
  /** edges of the definition that name a node it does not have: they cannot be drawn, the admin is told */
  dropped: DefEdge[]
}

export const LAYOUT = { colGap: 230, rowGap: 140, originX: 40, originY: 40 }

/**
 * autoLayout places nodes in layers, top to bottom: a node's layer is the length of the longest path to it from
 * a node without incoming edges (edges that close a cycle are ignored), and the nodes of a layer are spread
 * left to right, centred on the widest layer.
 */
export function autoLayout(def: Pick<Definition, 'nodes' | 'edges'>): Record<string, Point> {
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

/** conditionLabel is the short text drawn on an edge. */
export function conditionLabel(e: DefEdge): string | undefined {
  const parts: string[] = []
  if (e.default) parts.push(t('diagram.edge.default'))
  const s = conditionText(e.condition)
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
      type: 'smoothstep',
      label: conditionLabel(e),
      data: { edge: clone(e) },
    })
  })
  return { nodes, edges, dropped }
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
  const defEdges: DefEdge[] = edges.map((ce) => {
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
