// Dotted paths into the instance context ("applicant.days", "items.0.name"), the way form fields bind to it.

function segments(path: string): string[] {
  return path
    .split('.')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
}

/** getPath reads obj at a dotted path; undefined when any step is missing. */
export function getPath(obj: unknown, path: string): unknown {
  let cur: unknown = obj
  for (const seg of segments(path)) {
    if (cur === null || typeof cur !== 'object') return undefined
    cur = (cur as Record<string, unknown>)[seg]
  }
  return cur
}

/** setPath writes value at a dotted path, creating objects (or arrays for numeric steps) on the way. */
export function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const segs = segments(path)
  if (segs.length === 0) return
  let cur: Record<string, unknown> = obj
  segs.forEach((seg, i) => {
    if (i === segs.length - 1) {
      cur[seg] = value
      return
    }
    let next = cur[seg]
    if (next === null || typeof next !== 'object') {
      next = /^\d+$/.test(segs[i + 1]) ? [] : {}
      cur[seg] = next
    }
    cur = next as Record<string, unknown>
  })
}

/** isValidPath accepts the paths a form field may bind to: dot-separated names of letters, digits, '_' and '-'. */
export function isValidPath(path: string): boolean {
  return /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(path)
}

/** flatten lists the leaves of a JSON object as [dotted path, value] pairs (arrays stay whole). */
export function flatten(obj: unknown, prefix = ''): [string, unknown][] {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return prefix ? [[prefix, obj]] : []
  const out: [string, unknown][] = []
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    const p = prefix ? `${prefix}.${k}` : k
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0) out.push(...flatten(v, p))
    else out.push([p, v])
  }
  return out
}
