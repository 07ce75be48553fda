// Instance and template diagrams come from the server as Mermaid source (GET /instances/{id}/diagram puts each
// node's state on it as a class). The colours are the UI's business: classDefs for every state are added here
// when the server did not send its own, and when the source carries no state classes at all they are derived from
// the instance's node states, so a diagram is always coloured the same way.

export const NODE_STATES = ['active', 'waiting', 'completed', 'rejected', 'skipped', 'failed', 'cancelled'] as const

export const STATE_STYLES: Record<string, string> = {
  completed: 'fill:#dafbe1,stroke:#1a7f37,stroke-width:2px,color:#0f5323',
  active: 'fill:#ddf4ff,stroke:#0969da,stroke-width:3px,color:#0a3069',
  waiting: 'fill:#fff8c5,stroke:#9a6700,stroke-width:2px,color:#4d2d00',
  rejected: 'fill:#ffebe9,stroke:#cf222e,stroke-width:2px,color:#82071e',
  failed: 'fill:#ffebe9,stroke:#a40e26,stroke-width:2px,stroke-dasharray:4 2,color:#82071e',
  skipped: 'fill:#f6f8fa,stroke:#8c959f,stroke-dasharray:3 3,color:#6e7781',
  cancelled: 'fill:#eaeef2,stroke:#6e7781,color:#57606a',
}

export interface NodeStateRef {
  node_id: string
  state: string
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** decorateDiagram returns the Mermaid source with state styles (and, if missing, state classes) added. */
export function decorateDiagram(src: string, nodes: NodeStateRef[] = []): string {
  const text = src.trimEnd()
  if (!/^\s*(flowchart|graph)\b/m.test(text)) return text
  const extra: string[] = []
  for (const [state, style] of Object.entries(STATE_STYLES)) {
    if (!new RegExp(`^\\s*classDef\\s+([\\w-]+,)*${state}\\b`, 'm').test(text)) extra.push(`  classDef ${state} ${style}`) // i18n-ignore: Mermaid syntax
  }
  const hasClasses = /^\s*class\s+\S+\s+\S+/m.test(text) || /:::[\w-]+/.test(text)
  if (!hasClasses) {
    for (const n of nodes) {
      if (!/^[A-Za-z0-9_-]+$/.test(n.node_id) || !(NODE_STATES as readonly string[]).includes(n.state)) continue
      // Only ids the source really declares, and never a Mermaid keyword.
      if (['end', 'graph', 'subgraph', 'class', 'style'].includes(n.node_id)) continue
      if (!new RegExp(`(^|[^\\w-])${escapeRe(n.node_id)}([^\\w-]|$)`, 'm').test(text)) continue
      extra.push(`  class ${n.node_id} ${n.state}`) // i18n-ignore: Mermaid syntax
    }
  }
  return extra.length ? `${text}\n${extra.join('\n')}\n` : text + '\n'
}

/** EdgeWords are the words for the labels the server writes on edges (service/graph/mermaid.go). */
export interface EdgeWords {
  default: string
  onTimeout: string
  timeout: string
  onError: string
  pruned: string
  killed: string
}

const EDGE_WORDS: Record<string, keyof EdgeWords> = {
  default: 'default',
  'on timeout': 'onTimeout',
  timeout: 'timeout',
  'on error': 'onError',
}

function escapeLabel(s: string): string {
  return s.replace(/["#%&<>|`]/g, (c) => `#${c.charCodeAt(0)};`)
}

/**
 * localizeDiagram puts the UI's words on the edge labels the server writes in English: "default", "on timeout",
 * "timeout", "on error", and the edge states " · pruned" / " · killed" it appends to a label (API.md keeps the
 * Mermaid source the same for every client). A condition's text (`days >= 3`) is a formula and stays as it is; so
 * does any label the server may add that this UI does not know.
 */
export function localizeDiagram(src: string, words: EdgeWords): string {
  return src.replace(/(-->|-\.->)\|"([^"\n]*)"\|/g, (whole, arrow: string, text: string) => {
    const m = /^(?:(.*) · )?(pruned|killed)$/.exec(text)
    const head = m ? (m[1] ?? '') : text
    const known = Object.hasOwn(EDGE_WORDS, head) ? EDGE_WORDS[head] : undefined
    if (!known && !m) return whole
    const parts = [known ? escapeLabel(words[known]) : head]
    if (m) parts.push(escapeLabel(words[m[2] as 'pruned' | 'killed']))
    return `${arrow}|"${parts.filter(Boolean).join(' · ')}"|`
  })
}

let seq = 0

/** renderMermaid renders source into an SVG string; mermaid (large) is loaded on first use only. */
export async function renderMermaid(source: string): Promise<string> {
  const { default: mermaid } = await import('mermaid')
  if (!(renderMermaid as { ready?: boolean }).ready) {
    // suppressErrorRendering: a bad source must not leave mermaid's error picture in the page.
    mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', theme: 'default', suppressErrorRendering: true, flowchart: { useMaxWidth: true } })
    ;(renderMermaid as { ready?: boolean }).ready = true
  }
  const id = `halley-diagram-${++seq}`
  try {
    const { svg } = await mermaid.render(id, source)
    return svg
  } finally {
    // mermaid renders in a scratch element of <body>; on a parse error it may stay behind.
    for (const el of [document.getElementById(id), document.getElementById(`d${id}`)]) el?.remove()
  }
}
