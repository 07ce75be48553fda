import { describe, expect, it } from 'vitest'
import { flatten, getPath, isValidPath, setPath } from './path'

describe('getPath / setPath', () => {
  it('reads nested values and array indexes', () => {
    const o = { a: { b: [{ c: 1 }] } }
    expect(getPath(o, 'a.b.0.c')).toBe(1)
    expect(getPath(o, 'a.x.y')).toBeUndefined()
    expect(getPath(null, 'a')).toBeUndefined()
  })
  it('creates objects and arrays on the way', () => {
    const o: Record<string, unknown> = {}
    setPath(o, 'a.b', 1)
    setPath(o, 'list.0.name', 'x')
    expect(o).toEqual({ a: { b: 1 }, list: [{ name: 'x' }] })
  })
  it('overwrites a scalar that stands in the way', () => {
    const o: Record<string, unknown> = { a: 5 }
    setPath(o, 'a.b', 1)
    expect(o).toEqual({ a: { b: 1 } })
  })
})

describe('isValidPath', () => {
  it.each([
    ['days', true],
    ['applicant.name', true],
    ['items.0', true],
    ['', false],
    ['a..b', false],
    ['a b', false],
    ['.a', false],
  ])('%j → %s', (p, ok) => expect(isValidPath(p)).toBe(ok))
})

describe('flatten', () => {
  it('lists leaves by dotted path, arrays whole', () => {
    expect(flatten({ a: 1, b: { c: { d: 'x' } }, e: [1], f: {} })).toEqual([
      ['a', 1],
      ['b.c.d', 'x'],
      ['e', [1]],
      ['f', {}],
    ])
  })
})
