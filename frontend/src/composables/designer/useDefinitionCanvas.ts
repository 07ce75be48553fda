// The definition being designed, as a Vue Flow canvas holds it: its nodes and edges on the canvas (one Vue Flow
// store per designer, so reopening never shows a previous graph), and beside them what the canvas does not draw —
// the definition's options (edited in the side panel) and its own meta, which travels along unchanged. The other
// designer composables work on this one: editing (useCanvasEditing), checking (useLiveValidation), loading and
// saving (useDesignerDocument).
import { computed, nextTick, ref, shallowRef } from 'vue'
import { MarkerType, useVueFlow, type Edge, type Node } from '@vue-flow/core'
import { t } from '@/i18n'
import { canvasToDefinition, conditionLabel, definitionToCanvas, type CanvasEdge } from '@/lib/canvas'
import { cleanDefinition, retentionValid, type DefEdge, type Definition, type DefinitionOptions } from '@/lib/definition'
import { notifyError } from '@/lib/notify'

export function useDefinitionCanvas() {
  const flowId = `halley-designer-${Math.random().toString(36).slice(2)}`
  const flow = useVueFlow(flowId)
  const { nodes, edges, setNodes, setEdges, fitView } = flow

  // The definition's own meta, minus the layout (the canvas holds the positions).
  const meta = shallowRef<Record<string, unknown> | undefined>()
  const options = ref<DefinitionOptions>({})

  /** the definition as designed: the canvas' graph (positions as its layout), the options and the meta */
  const definition = computed<Definition>(() => ({ ...canvasToDefinition(nodes.value as never, edges.value as never), options: options.value, meta: meta.value }))
  /** the definition as the server reads it (no positions): what validation looks at */
  const semanticKey = computed(() => JSON.stringify(cleanDefinition(definition.value)))
  /** the definition as it is saved, positions included: what a draft's being saved or not compares */
  const fullKey = computed(() => JSON.stringify(cleanDefinition(definition.value, { withLayout: true })))
  const retentionError = computed(() => (retentionValid(options.value.retention) ? '' : t('designer.retentionInvalid')))

  /** decorate makes a canvas edge look as the designer draws edges: an arrow, its condition as a label. */
  function decorate(e: CanvasEdge | Edge): Edge {
    const de = (e.data as { edge: DefEdge }).edge
    return { ...e, type: 'smoothstep', markerEnd: MarkerType.ArrowClosed, label: conditionLabel(de), ariaLabel: t('designer.edgeAria', { from: e.source, to: e.target }), data: e.data } as Edge
  }

  /** show puts a definition on the canvas (edges to missing nodes are dropped, and said), fitting it in view. */
  async function show(def: Definition, fit = true) {
    const { layout: _drop, ...rest } = def.meta ?? {}
    meta.value = Object.keys(rest).length ? rest : undefined
    options.value = { ...(def.options ?? {}) }
    const g = definitionToCanvas(def)
    setNodes(g.nodes as unknown as Node[])
    setEdges(g.edges.map(decorate))
    if (g.dropped.length) {
      notifyError(new Error(t('designer.dropped', { n: g.dropped.length, list: g.dropped.map((e) => `${e.from}→${e.to}`).join(', ') })))
    }
    if (fit) {
      await nextTick()
      setTimeout(() => fitView({ padding: 0.2, maxZoom: 1.1 }), 50)
    }
  }

  return { flowId, flow, nodes, edges, options, definition, semanticKey, fullKey, retentionError, decorate, show }
}

export type DefinitionCanvas = ReturnType<typeof useDefinitionCanvas>
