// Editing the graph on the designer's canvas: node types dropped from the palette (dragged, or clicked into the
// middle), connections checked before they are drawn, what is selected, deleting it, an edge's condition, a node's
// rename (its edges and branches follow), tidying the layout, and jumping to a node a problem names.
import { computed, ref, type Ref } from 'vue'
import type { Connection, Edge } from '@vue-flow/core'
import { t } from '@/i18n'
import { autoLayout, canConnect, conditionLabel } from '@/lib/canvas'
import { NODE_TYPES, defaultNode, newNodeId, renameNode, type DefEdge, type DefNode, type NodeType } from '@/lib/definition'
import { sampleContext } from '@/lib/form'
import { conditionFields } from '@/lib/conditionBuilder'
import { notifyError } from '@/lib/notify'
import type { DefinitionCanvas } from './useDefinitionCanvas'

/** What is selected on the canvas: one node or one edge. */
export type Selection = { kind: 'node' | 'edge'; id: string } | null

// The drag payload of a palette item: its node type.
const DRAG_TYPE = 'application/x-halley-node'

/** canvasEl is the canvas' element, for a clicked palette item to land in its middle. */
export function useCanvasEditing(c: DefinitionCanvas, readonly: Ref<boolean>, canvasEl: Readonly<Ref<HTMLElement | null>>) {
  const { nodes, edges, addNodes, addEdges, removeNodes, removeEdges, findEdge, screenToFlowCoordinate, onConnect, fitView } = c.flow
  const selection = ref<Selection>(null)

  // ---- the palette ----
  function onPaletteDrag(ev: DragEvent, type: NodeType) {
    ev.dataTransfer?.setData(DRAG_TYPE, type)
    if (ev.dataTransfer) ev.dataTransfer.effectAllowed = 'move'
  }

  function onDragOver(ev: DragEvent) {
    if (ev.dataTransfer?.types.includes(DRAG_TYPE)) {
      ev.preventDefault()
      ev.dataTransfer.dropEffect = 'move'
    }
  }

  function onDrop(ev: DragEvent) {
    const type = ev.dataTransfer?.getData(DRAG_TYPE) as NodeType | ''
    if (!type || !NODE_TYPES.includes(type)) return
    ev.preventDefault()
    const p = screenToFlowCoordinate({ x: ev.clientX, y: ev.clientY })
    addNode(type, { x: p.x - 90, y: p.y - 30 })
  }

  /** addNode adds a node of a type where it was dropped, or near the canvas' middle; one start at most. */
  function addNode(type: NodeType, position?: { x: number; y: number }) {
    if (readonly.value) return
    if (type === 'start' && nodes.value.some((n) => (n.data as { node: DefNode }).node.type === 'start')) {
      notifyError(new Error(t('designer.oneStart')))
      return
    }
    const id = newNodeId(type, nodes.value.map((n) => n.id))
    if (!position) {
      const rect = canvasEl.value?.getBoundingClientRect()
      const mid = rect ? screenToFlowCoordinate({ x: rect.left + rect.width / 2, y: rect.top + rect.height / 2 }) : { x: 100, y: 100 }
      position = { x: mid.x - 90 + (nodes.value.length % 5) * 12, y: mid.y - 30 + (nodes.value.length % 5) * 12 }
    }
    addNodes([{ id, type: 'halley', position, data: { node: defaultNode(type, id) } }])
    selection.value = { kind: 'node', id }
  }

  // ---- connecting ----
  let edgeSeq = 0
  onConnect((conn: Connection) => {
    if (readonly.value) return
    const why = canConnect(c.definition.value, conn.source, conn.target)
    if (why) {
      notifyError(new Error(why))
      return
    }
    const id = `new${++edgeSeq}:${conn.source}->${conn.target}`
    addEdges([c.decorate({ id, source: conn.source, target: conn.target, data: { edge: { from: conn.source, to: conn.target } } } as Edge)])
    selection.value = { kind: 'edge', id }
  })

  // ---- the selection ----
  const selectedNode = computed(() => {
    const s = selection.value
    if (s?.kind !== 'node') return null
    return (nodes.value.find((n) => n.id === s.id)?.data as { node: DefNode } | undefined)?.node ?? null
  })
  const selectedEdge = computed(() => {
    const s = selection.value
    if (s?.kind !== 'edge') return null
    return edges.value.find((e) => e.id === s.id) ?? null
  })
  /** the selected edge as the definition has it, its ends as drawn */
  const selectedEdgeDef = computed(() => (selectedEdge.value ? { ...(selectedEdge.value.data as { edge: DefEdge }).edge, from: selectedEdge.value.source, to: selectedEdge.value.target } : null))
  /** how many edges lead into the selected node */
  const indegree = computed(() => (selectedNode.value ? edges.value.filter((e) => e.target === selection.value!.id).length : 0))
  /** a sample context for an edge's condition tester, from the start form's fields */
  const testerSample = computed(() => sampleContext(c.definition.value.nodes.find((n) => n.type === 'start')?.trigger?.form))

  function select(kind: 'node' | 'edge', id: string) {
    if (kind === 'edge' && id.startsWith('branch:')) return // a branch arrow: nothing to edit on it
    selection.value = { kind, id }
  }
  function clearSelection() {
    selection.value = null
  }
  /** onRemoved forgets the selection when Vue Flow removed what it names (the Delete key). */
  function onRemoved(changes: { type: string; id?: string }[]) {
    if (changes.some((ch) => ch.type === 'remove' && selection.value?.id === ch.id)) selection.value = null
  }

  function deleteSelected() {
    const s = selection.value
    if (!s || readonly.value) return
    if (s.kind === 'node') removeNodes([s.id], true)
    else removeEdges([s.id])
    selection.value = null
  }

  /** patchEdge changes the selected edge's condition or default flag. */
  function patchEdge(p: Partial<DefEdge>) {
    const e = selectedEdge.value && findEdge(selectedEdge.value.id)
    if (!e) return
    const data = e.data as { edge: DefEdge }
    const next: DefEdge = { ...data.edge, ...p }
    if (next.condition === undefined) delete next.condition
    if (!next.default) delete next.default
    e.data = { edge: next }
    e.label = conditionLabel(next, conditionFields(c.definition.value.nodes))
  }

  /** rename gives a node a new id; its edges and every branch naming it follow. */
  async function rename(from: string, to: string) {
    const def = c.definition.value
    const err = renameNode(def, from, to)
    if (err) {
      notifyError(new Error(err))
      return
    }
    await c.show(def, false)
    selection.value = { kind: 'node', id: to.trim() }
  }

  /** relayout lays the graph out in layers. */
  function relayout() {
    const pos = autoLayout(c.definition.value)
    for (const n of nodes.value) if (pos[n.id]) n.position = { ...pos[n.id] }
    setTimeout(() => fitView({ padding: 0.2, maxZoom: 1.1, duration: 300 }), 30)
  }

  /** focus selects the first of the named nodes that is on the canvas and brings it into view. */
  function focus(ids: string[] = []) {
    const id = ids.find((n) => nodes.value.some((x) => x.id === n))
    if (!id) return
    selection.value = { kind: 'node', id }
    fitView({ nodes: [id], padding: 1.2, maxZoom: 1.2, duration: 300 })
  }

  return {
    selection,
    selectedNode,
    selectedEdgeDef,
    indegree,
    testerSample,
    onPaletteDrag,
    onDragOver,
    onDrop,
    addNode,
    select,
    clearSelection,
    onRemoved,
    deleteSelected,
    patchEdge,
    rename,
    relayout,
    focus,
  }
}

export type CanvasEditing = ReturnType<typeof useCanvasEditing>
