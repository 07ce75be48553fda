// Turning the errors of POST /templates/validate into highlights on the canvas: each error names the nodes at
// fault; a cycle is drawn on the edges that form it; an edge to a missing node is drawn on the edge; what names
// nothing on the canvas is listed above it.

export interface ValidationError {
  code: string
  message: string
  nodes?: string[]
}

export interface ValidationResult {
  valid: boolean
  errors: ValidationError[]
  /** warnings do not stop publishing (unknown_user: a static approver that is no user yet) */
  warnings?: ValidationError[]
}

export interface EdgeRef {
  id: string
  source: string
  target: string
}

export interface Highlights {
  /** node id → the errors that name it */
  nodes: Record<string, ValidationError[]>
  /** canvas edge id → the errors drawn on it */
  edges: Record<string, ValidationError[]>
  /** errors that name nothing on the canvas */
  general: ValidationError[]
}

function add(map: Record<string, ValidationError[]>, key: string, err: ValidationError) {
  const list = (map[key] ??= [])
  if (!list.includes(err)) list.push(err)
}

/** computeHighlights distributes validation errors over the canvas' nodes and edges. */
export function computeHighlights(errors: ValidationError[], nodeIds: Iterable<string>, edges: EdgeRef[]): Highlights {
  const ids = new Set(nodeIds)
  const h: Highlights = { nodes: {}, edges: {}, general: [] }
  for (const err of errors) {
    const named = (err.nodes ?? []).filter((id) => typeof id === 'string')
    let placed = false
    for (const id of named) {
      if (ids.has(id)) {
        add(h.nodes, id, err)
        placed = true
      }
    }
    if (err.code === 'cycle' && named.length > 1) {
      // The cycle's nodes in order: consecutive pairs, and the last back to the first, are its edges.
      const pairs = new Set<string>()
      named.forEach((id, i) => pairs.add(`${id}\u0000${named[(i + 1) % named.length]}`))
      for (const e of edges) {
        if (pairs.has(`${e.source}\u0000${e.target}`)) {
          add(h.edges, e.id, err)
          placed = true
        }
      }
    }
    if (err.code === 'unknown_node') {
      const missing = new Set(named.filter((id) => !ids.has(id)))
      for (const e of edges) {
        if (missing.has(e.source) || missing.has(e.target)) {
          add(h.edges, e.id, err)
          placed = true
        }
      }
    }
    if (!placed) h.general.push(err)
  }
  return h
}

/** nodeErrorText is the tooltip of a highlighted node. */
export function nodeErrorText(errs: ValidationError[] | undefined): string {
  return (errs ?? []).map((e) => `${e.message} (${e.code})`).join('\n')
}

/** errorsFromDetails reads `details.errors` of a 422 publish answer; [] when it has none. */
export function errorsFromDetails(details: unknown): ValidationError[] {
  if (!details || typeof details !== 'object') return []
  const errs = (details as { errors?: unknown }).errors
  if (!Array.isArray(errs)) return []
  return errs
    .filter((e): e is Record<string, unknown> => !!e && typeof e === 'object')
    .map((e) => ({
      code: String(e.code ?? 'invalid'),
      message: String(e.message ?? e.code ?? 'invalid'),
      nodes: Array.isArray(e.nodes) ? e.nodes.map(String) : [],
    }))
}

/**
 * latestOnly guards asynchronous results against running out of order: live validation fires on every edit, and
 * only the answer to the newest request may be shown.
 */
export function latestOnly() {
  let seq = 0
  return {
    next(): number {
      return ++seq
    },
    isLatest(token: number): boolean {
      return token === seq
    },
  }
}
