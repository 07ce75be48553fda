import { describe, expect, it } from 'vitest'
import { diff, flatten, show } from './diff'

describe('flatten', () => {
  it('maps leaves to dotted paths and keeps plain arrays whole', () => {
    const m = flatten({ a: 1, b: { c: 'x', d: [1, 2] }, nodes: [{ id: 's', trigger: { kind: 'manual' } }], e: {} })
    expect([...m.entries()]).toEqual([
      ['a', 1],
      ['b.c', 'x'],
      ['b.d', [1, 2]],
      ['nodes.0.id', 's'],
      ['nodes.0.trigger.kind', 'manual'],
      ['e', {}],
    ])
  })
})

describe('diff', () => {
  it('lists changed, added and removed fields in path order', () => {
    const before = { username: 'carol', roles: [], email: '', disabled: false, token_version: 0 }
    const after = { username: 'carol', roles: ['ops'], email: 'c@example.com', disabled: false, token_version: 0, mobile: '1' }
    expect(diff(before, after)).toEqual([
      { path: 'email', kind: 'changed', before: '', after: 'c@example.com' },
      { path: 'mobile', kind: 'added', after: '1' },
      { path: 'roles', kind: 'changed', before: [], after: ['ops'] },
    ])
  })
  it('treats a missing side as empty: a create adds everything, a delete removes everything', () => {
    expect(diff(null, { name: 'eng' })).toEqual([{ path: 'name', kind: 'added', after: 'eng' }])
    expect(diff({ name: 'eng' }, null)).toEqual([{ path: 'name', kind: 'removed', before: 'eng' }])
  })
  it('orders node indexes numerically and can list unchanged fields', () => {
    const mk = (n: number) => ({ nodes: Array.from({ length: n }, (_, i) => ({ id: `n${i}` })) })
    const d = diff(mk(2), mk(11))
    expect(d.map((c) => c.path)).toEqual(['nodes.2.id', 'nodes.3.id', 'nodes.4.id', 'nodes.5.id', 'nodes.6.id', 'nodes.7.id', 'nodes.8.id', 'nodes.9.id', 'nodes.10.id'])
    expect(diff({ a: 1 }, { a: 1 }, true)).toEqual([{ path: 'a', kind: 'same', before: 1, after: 1 }])
    expect(diff({ a: 1 }, { a: 1 })).toEqual([])
  })
})

describe('show', () => {
  it('shows strings as they are and the rest as JSON', () => {
    expect(show('x')).toBe('x')
    expect(show('')).toBe('""')
    expect(show(['a'])).toBe('["a"]')
    expect(show(undefined)).toBe('')
    expect(show(null)).toBe('null')
  })
})
