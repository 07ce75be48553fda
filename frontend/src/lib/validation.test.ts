import { describe, expect, it } from 'vitest'
import { computeHighlights, errorsFromDetails, latestOnly, nodeErrorText, type ValidationError } from './validation'

const nodes = ['start', 'a', 'b', 'c', 'end']
const edges = [
  { id: 'e1', source: 'start', target: 'a' },
  { id: 'e2', source: 'a', target: 'b' },
  { id: 'e3', source: 'b', target: 'c' },
  { id: 'e4', source: 'c', target: 'a' },
  { id: 'e5', source: 'c', target: 'end' },
]

describe('computeHighlights', () => {
  it('puts each error on every node it names', () => {
    const errs: ValidationError[] = [
      { code: 'bad_node', message: 'approval a has no approvers', nodes: ['a'] },
      { code: 'dead_end', message: 'cannot reach an end', nodes: ['a', 'b'] },
    ]
    const h = computeHighlights(errs, nodes, edges)
    expect(h.nodes.a.map((e) => e.code)).toEqual(['bad_node', 'dead_end'])
    expect(h.nodes.b.map((e) => e.code)).toEqual(['dead_end'])
    expect(h.nodes.start).toBeUndefined()
    expect(h.general).toEqual([])
  })

  it('draws a cycle on the edges between its consecutive nodes, including the closing one', () => {
    const cycle: ValidationError = { code: 'cycle', message: 'a → b → c → a', nodes: ['a', 'b', 'c'] }
    const h = computeHighlights([cycle], nodes, edges)
    expect(Object.keys(h.edges).sort()).toEqual(['e2', 'e3', 'e4'])
    expect(Object.keys(h.nodes).sort()).toEqual(['a', 'b', 'c'])
  })

  it('draws an edge to a missing node on that edge', () => {
    const err: ValidationError = { code: 'unknown_node', message: 'edge to ghost', nodes: ['ghost'] }
    const h = computeHighlights([err], nodes, [...edges, { id: 'e6', source: 'b', target: 'ghost' }])
    expect(Object.keys(h.edges)).toEqual(['e6'])
    expect(h.general).toEqual([])
  })

  it('lists errors that name nothing on the canvas as general', () => {
    const errs: ValidationError[] = [
      { code: 'no_start', message: 'no start node' },
      { code: 'duplicate_id', message: 'twice', nodes: ['zzz'] },
      { code: 'no_end', message: 'no end', nodes: [] },
    ]
    const h = computeHighlights(errs, nodes, edges)
    expect(h.general.map((e) => e.code)).toEqual(['no_start', 'duplicate_id', 'no_end'])
    expect(h.nodes).toEqual({})
  })

  it('does not list the same error twice on a node named twice', () => {
    const err: ValidationError = { code: 'duplicate_id', message: 'a twice', nodes: ['a', 'a'] }
    expect(computeHighlights([err], nodes, edges).nodes.a).toHaveLength(1)
  })

  it('turns into an empty map when the definition is valid', () => {
    expect(computeHighlights([], nodes, edges)).toEqual({ nodes: {}, edges: {}, general: [] })
  })
})

describe('nodeErrorText', () => {
  it('joins messages with their codes', () => {
    expect(nodeErrorText([{ code: 'bad_node', message: 'no approvers' }, { code: 'dead_end', message: 'stuck' }])).toBe('no approvers (bad_node)\nstuck (dead_end)')
    expect(nodeErrorText(undefined)).toBe('')
  })
})

describe('errorsFromDetails', () => {
  it('reads details.errors of a 422 publish answer', () => {
    expect(errorsFromDetails({ errors: [{ code: 'cycle', message: 'loop', nodes: ['a', 'b'] }, { code: 'no_end' }] })).toEqual([
      { code: 'cycle', message: 'loop', nodes: ['a', 'b'] },
      { code: 'no_end', message: 'no_end', nodes: [] },
    ])
  })
  it.each([undefined, null, 'x', {}, { errors: 'nope' }])('gives [] for %s', (d) => {
    expect(errorsFromDetails(d)).toEqual([])
  })
})

describe('latestOnly', () => {
  it('accepts only the newest of overlapping requests', async () => {
    const guard = latestOnly()
    const applied: string[] = []
    const run = (name: string, ms: number) => {
      const t = guard.next()
      return new Promise<void>((r) => setTimeout(r, ms)).then(() => {
        if (guard.isLatest(t)) applied.push(name)
      })
    }
    await Promise.all([run('slow-old', 30), run('fast-new', 5)])
    expect(applied).toEqual(['fast-new'])
  })
})
