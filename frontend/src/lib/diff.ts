// Before/after of an audit entry as a list of changed fields: both sides flattened to dotted paths (arrays of
// plain values stay one value, so ["a","b"] → ["a","c"] reads as one change), then compared.

export type Change = {
  path: string
  kind: 'added' | 'removed' | 'changed' | 'same'
  before?: unknown
  after?: unknown
}

function isObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v)
}

function isPlainArray(v: unknown[]): boolean {
  return v.every((x) => x === null || typeof x !== 'object')
}

/** flatten maps every leaf of v to its dotted path ("nodes.2.trigger.kind"); the root of a scalar is "". */
export function flatten(v: unknown, prefix = '', out: Map<string, unknown> = new Map()): Map<string, unknown> {
  if (isObject(v)) {
    const keys = Object.keys(v)
    if (!keys.length && prefix) out.set(prefix, {})
    for (const k of keys) flatten(v[k], prefix ? `${prefix}.${k}` : k, out)
  } else if (Array.isArray(v) && !isPlainArray(v)) {
    if (!v.length && prefix) out.set(prefix, [])
    v.forEach((x, i) => flatten(x, prefix ? `${prefix}.${i}` : String(i), out))
  } else if (v !== undefined) {
    out.set(prefix, v)
  }
  return out
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * diff lists the fields of before and after in path order with what happened to each: changed, added (only
 * after), removed (only before); unchanged ones too when all is set.
 */
export function diff(before: unknown, after: unknown, all = false): Change[] {
  const b = before === null || before === undefined ? new Map<string, unknown>() : flatten(before)
  const a = after === null || after === undefined ? new Map<string, unknown>() : flatten(after)
  const paths = [...new Set([...b.keys(), ...a.keys()])].sort((x, y) => x.localeCompare(y, 'en', { numeric: true }))
  const out: Change[] = []
  for (const path of paths) {
    const hb = b.has(path)
    const ha = a.has(path)
    if (hb && ha) {
      if (!same(b.get(path), a.get(path))) out.push({ path, kind: 'changed', before: b.get(path), after: a.get(path) })
      else if (all) out.push({ path, kind: 'same', before: b.get(path), after: a.get(path) })
    } else if (ha) out.push({ path, kind: 'added', after: a.get(path) })
    else out.push({ path, kind: 'removed', before: b.get(path) })
  }
  return out
}

/** show is how a value reads in the diff table: strings as they are ("" when empty), everything else as JSON. */
export function show(v: unknown): string {
  if (v === undefined) return ''
  if (typeof v === 'string') return v === '' ? '""' : v
  return JSON.stringify(v)
}
