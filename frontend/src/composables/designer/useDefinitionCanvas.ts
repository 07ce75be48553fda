// The definition being designed, as a Vue Flow canvas holds it: its nodes and edges on the canvas (one Vue Flow
// store per designer, so reopening never shows a previous graph), and beside them what the canvas does not draw —
// the definition's options (edited in the side panel) and its own meta, which travels along unchanged. The other
// designer composables work on this one: editing (useCanvasEditing), checking (useLiveValidation), loading and
// saving (useDesignerDocument).
import { computed, nextTick, ref, shallowRef, watch } from 'vue'
import { MarkerType, useVueFlow, type Edge, type Node } from '@vue-flow/core'
import { t } from '@/i18n'
import { branchEdges, canvasToDefinition, conditionLabel, definitionToCanvas, type CanvasEdge } from '@/lib/canvas'
import { conditionFields } from '@/lib/conditionBuilder'
import { cleanDefinition, retentionValid, type DefEdge, type Definition, type DefinitionOptions } from '@/lib/definition'
import { notifyError } from '@/lib/notify'

export function useDefinitionCanvas() {
  const flowId = `halley-designer-${Math.random().toString(36).slice(2)}`
  const flow = useVueFlow(flowId)
  const { nodes, edges, setNodes, setEdges, fitView } = flow

  // The definition's own meta, minus the layout (the canvas holds the positions).
  const meta = shallowRef<Record<string, unknown> | undefined>()
  const options = ref<DefinitionOptions>({})
  // The title pattern and the labels per language (template name, description, title pattern): process settings.
  const labels = ref<Pick<Definition, 'title_pattern' | 'i18n'>>({})

  /** the definition as designed: the canvas' graph (positions as its layout), the options and the meta */
  const definition = computed<Definition>(() => ({
    ...canvasToDefinition(nodes.value as never, edges.value as never),
    ...labels.value,
    options: options.value,
    meta: meta.value,
  }))
  /** the definition as the server reads it (no positions): what validation looks at */
  const semanticKey = computed(() => JSON.stringify(cleanDefinition(definition.value)))
  /** the definition as it is saved, positions included: what a draft's being saved or not compares */
  const fullKey = computed(() => JSON.stringify(cleanDefinition(definition.value, { withLayout: true })))
  const retentionError = computed(() => (retentionValid(options.value.retention) ? '' : t('designer.retentionInvalid')))

  /** decorate makes a canvas edge look as the designer draws edges: around the nodes, an arrow, its condition as
   * people read it as its label; a branch arrow (not an edge of the definition) dashed, not selectable. */
  function decorate(e: CanvasEdge | Edge, fields = conditionFields(definition.value.nodes)): Edge {
    const data = e.data as { edge: DefEdge; virtual?: boolean }
    if (data.virtual) return { ...e, type: 'routed', markerEnd: MarkerType.ArrowClosed, class: 'branch-edge', selectable: false, deletable: false, focusable: false, data } as Edge
    return { ...e, type: 'routed', markerEnd: MarkerType.ArrowClosed, label: conditionLabel(data.edge, fields), ariaLabel: t('designer.edgeAria', { from: e.source, to: e.target }), data } as Edge
  }

  /** show puts a definition on the canvas (edges to missing nodes are dropped, and said), fitting it in view. */
  async function show(def: Definition, fit = true) {
    const { layout: _drop, ...rest } = def.meta ?? {}
    meta.value = Object.keys(rest).length ? rest : undefined
    options.value = { ...(def.options ?? {}) }
    labels.value = { title_pattern: def.title_pattern, i18n: def.i18n }
    const g = definitionToCanvas(def)
    setNodes(g.nodes as unknown as Node[])
    const fields = conditionFields(def.nodes)
    setEdges(g.edges.map((e) => decorate(e, fields)))
    if (g.dropped.length) {
      notifyError(new Error(t('designer.dropped', { n: g.dropped.length, list: g.dropped.map((e) => `${e.from}→${e.to}`).join(', ') })))
    }
    if (fit) {
      await nextTick()
      setTimeout(() => fitView({ padding: 0.2, maxZoom: 1.1 }), 50)
    }
  }

  // The branch arrows follow the nodes' timeout and catch branches as they are edited.
  const branchKey = computed(() => JSON.stringify(branchEdges(definition.value).map((e) => [e.id, e.label])))
  watch(branchKey, () => {
    const keep = edges.value.filter((e) => !(e.data as { virtual?: boolean } | undefined)?.virtual)
    setEdges([...keep, ...branchEdges(definition.value).map((e) => decorate(e))])
  })

  return { flowId, flow, nodes, edges, options, labels, definition, semanticKey, fullKey, retentionError, decorate, show }
}

export type DefinitionCanvas = ReturnType<typeof useDefinitionCanvas>
