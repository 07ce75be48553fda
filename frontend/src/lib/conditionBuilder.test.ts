import { afterEach, describe, expect, it } from 'vitest'
import { OPS, compileCondition, conditionFields, opsFor, parseCondition, typedValue, type CondGroup, type CondRow, type Op } from './conditionBuilder'
import { readableCondition } from './conditionText'
import { setLanguage } from '@/i18n'
import type { DefNode } from './definition'

const row = (field: string, op: Op, value?: unknown): CondRow => (op === 'exists' || op === 'notExists' ? { kind: 'row', field, op } : { kind: 'row', field, op, value })
const and = (...items: (CondRow | CondGroup)[]): CondGroup => ({ kind: 'group', join: 'and', items })
const or = (...items: (CondRow | CondGroup)[]): CondGroup => ({ kind: 'group', join: 'or', items })

// Every operator of the builder, the query it compiles to.
const EVERY_OP: [Op, unknown, unknown][] = [
  ['eq', 3, { days: 3 }],
  ['ne', 3, { days: { $ne: 3 } }],
  ['gt', 3, { days: { $gt: 3 } }],
  ['gte', 3, { days: { $gte: 3 } }],
  ['lt', 3, { days: { $lt: 3 } }],
  ['lte', 3, { days: { $lte: 3 } }],
  ['in', [1, 2], { days: { $in: [1, 2] } }],
  ['nin', [1, 2], { days: { $nin: [1, 2] } }],
  ['exists', undefined, { days: { $exists: true } }],
  ['notExists', undefined, { days: { $exists: false } }],
  ['regex', '^a', { days: { $regex: '^a' } }],
]

describe('the condition builder compiles every operator and parses it back', () => {
  it('covers every operator', () => expect(EVERY_OP.map((x) => x[0]).sort()).toEqual([...OPS].sort()))
  for (const [op, value, query] of EVERY_OP) {
    it(op, () => {
      const g = and(row('days', op, value))
      expect(compileCondition(g)).toEqual(query)
      expect(parseCondition(query)).toEqual({ ok: true, group: g })
    })
  }
  it('an object compared for equality is written with $eq, and read back', () => {
    const g = and(row('meta', 'eq', { a: 1 }))
    expect(compileCondition(g)).toEqual({ meta: { $eq: { a: 1 } } })
    expect(parseCondition({ meta: { $eq: { a: 1 } } })).toEqual({ ok: true, group: g })
  })
  it('AND of rows on distinct fields is one object; two bounds of one field one operator object', () => {
    expect(compileCondition(and(row('days', 'gt', 3), row('type', 'eq', 'annual')))).toEqual({ days: { $gt: 3 }, type: 'annual' })
    expect(compileCondition(and(row('days', 'gte', 1), row('days', 'lte', 5)))).toEqual({ days: { $gte: 1, $lte: 5 } })
    expect(compileCondition(and(row('days', 'gt', 1), row('days', 'gt', 5)))).toEqual({ $and: [{ days: { $gt: 1 } }, { days: { $gt: 5 } }] })
    expect(compileCondition(and(row('a', 'eq', 1), row('b', 'eq', 1), row('a', 'gt', 0)))).toEqual({ $and: [{ a: 1 }, { b: 1 }, { a: { $gt: 0 } }] })
  })
  it('OR groups and nested AND groups', () => {
    const g = or(row('days', 'gt', 3), and(row('lead_review.escalate', 'eq', true), row('type', 'ne', 'sick')))
    const q = { $or: [{ days: { $gt: 3 } }, { 'lead_review.escalate': true, type: { $ne: 'sick' } }] }
    expect(compileCondition(g)).toEqual(q)
    expect(parseCondition(q)).toEqual({ ok: true, group: g })
  })
  it('reads the ready-made leave condition', () => {
    const q = { $or: [{ days: { $gt: 3 } }, { 'lead_review.escalate': true }] }
    expect(parseCondition(q)).toEqual({ ok: true, group: or(row('days', 'gt', 3), row('lead_review.escalate', 'eq', true)) })
  })
  it('rows without a field and empty groups are left out; nothing is {} (always)', () => {
    expect(compileCondition(and())).toEqual({})
    expect(compileCondition(and(row('', 'eq', 1), or()))).toEqual({})
    expect(compileCondition(and(row('', 'eq', 1), row('x', 'gt', 1)))).toEqual({ x: { $gt: 1 } })
    expect(parseCondition(undefined)).toEqual({ ok: true, group: and() })
    expect(parseCondition({})).toEqual({ ok: true, group: and() })
  })
  it('names the operators it cannot show', () => {
    expect(parseCondition({ tags: { $elemMatch: { $gt: 1 } } })).toEqual({ ok: false, unsupported: ['$elemMatch'] })
    expect(parseCondition({ $nor: [{ a: 1 }] })).toEqual({ ok: false, unsupported: ['$nor'] })
    expect(parseCondition({ name: { $regex: 'a', $options: 'i' } })).toMatchObject({ ok: false })
    expect(parseCondition({ a: { $not: { $gt: 1 } } })).toMatchObject({ ok: false, unsupported: ['$not'] })
  })

  // Random rows and groups, as the builder makes them (an OR inside an AND and the other way round, two items at
  // least in a nested group): compiled and parsed back they are the same.
  it('round-trips 500 random conditions', () => {
    let s = 7
    const r = () => ((s = (s * 1103515245 + 12345) % 2 ** 31), s / 2 ** 31)
    const pick = <T,>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]
    const valueFor = (op: Op) => (op === 'in' || op === 'nin' ? [Math.floor(r() * 9), 'x'] : op === 'regex' ? '^v' : pick([1, 2.5, 'a', true, false, null]))
    const randomRow = (): CondRow => row(pick(['days', 'amount', 'type', 'a.b', 'lead_review.escalate']), pick(OPS), valueFor(pick(OPS)))
    const fix = (x: CondRow): CondRow => (x.op === 'exists' || x.op === 'notExists' ? row(x.field, x.op) : x.op === 'in' || x.op === 'nin' ? row(x.field, x.op, [1, 'x']) : x.op === 'regex' ? row(x.field, x.op, '^v') : x)
    const group = (join: 'and' | 'or', depth: number): CondGroup => {
      const n = 2 + Math.floor(r() * 3)
      const items: (CondRow | CondGroup)[] = []
      for (let i = 0; i < n; i++) items.push(depth < 2 && r() < 0.3 ? group(join === 'and' ? 'or' : 'and', depth + 1) : fix(randomRow()))
      return { kind: 'group', join, items }
    }
    for (let i = 0; i < 500; i++) {
      const g = group(r() < 0.5 ? 'and' : 'or', 0)
      const q = compileCondition(g)
      const back = parseCondition(q)
      expect(back.ok, JSON.stringify(q)).toBe(true)
      if (back.ok) expect(compileCondition(back.group)).toEqual(q)
      // AND groups may come back as one object: the same query; an OR group comes back as it was
      if (back.ok && g.join === 'or') expect(back.group).toEqual(g)
    }
  })
})

describe('fields and values', () => {
  const nodes: DefNode[] = [
    { id: 'start', type: 'start', trigger: { kind: 'form', form: { kind: 'components', fields: [
      { id: 'd', type: 'number', label: '天数', field: 'days' },
      { id: 't', type: 'select', label: '类型', field: 'type', options: [{ label: '年假', value: 'annual' }] },
      { id: 'x', type: 'description', label: 'note', text: 'hi' },
    ] } } },
    { id: 'lead', type: 'approval', approvers: { users: ['bob'] }, form: { kind: 'components', fields: [
      { id: 'd', type: 'number', label: 'Days (again)', field: 'days', readonly: true },
      { id: 'e', type: 'switch', label: '上报', field: 'lead_review.escalate' },
    ] } },
  ]
  it('offers the start form\'s fields first, then the approvers\' forms\', one per path, with their types', () => {
    expect(conditionFields(nodes).map((f) => [f.path, f.label, f.type])).toEqual([
      ['days', '天数', 'number'],
      ['type', '类型', 'select'],
      ['lead_review.escalate', '上报', 'switch'],
    ])
  })
  it('labels the fields and their options in the user\'s language, falling back to the plain labels', () => {
    const labelled: DefNode[] = [
      { id: 'start', type: 'start', trigger: { kind: 'form', form: { kind: 'components', fields: [
        { id: 'd', type: 'number', label: 'Days', field: 'days', i18n: { 'zh-CN': { label: '天数' }, en: { label: 'Days off' } } },
        { id: 't', type: 'select', label: 'Kind', field: 'kind', options: [{ label: 'Annual', value: 'annual', i18n: { 'zh-CN': { label: '年假' } } }, { label: 'Sick', value: 'sick' }] },
      ] } } },
      { id: 'lead', type: 'approval', approvers: { users: ['bob'] }, form: { kind: 'components', fields: [
        { id: 'e', type: 'switch', label: 'Ask the department leader too', field: 'lead_review.escalate', i18n: { 'zh-CN': { label: '同时请部门负责人审批' } } },
      ] } },
    ]
    const zh = conditionFields(labelled, 'zh-CN')
    expect(zh.map((f) => [f.path, f.label])).toEqual([['days', '天数'], ['kind', 'Kind'], ['lead_review.escalate', '同时请部门负责人审批']])
    expect(zh[1].options?.map((o) => o.label)).toEqual(['年假', 'Sick'])
    expect(conditionFields(labelled, 'en').map((f) => f.label)).toEqual(['Days off', 'Kind', 'Ask the department leader too'])
    // The builder's card reads them: the Chinese page says the condition in Chinese.
    setLanguage('zh-CN', false)
    try {
      expect(readableCondition({ $or: [{ days: { $gt: 3 } }, { 'lead_review.escalate': true }] }, conditionFields(labelled))).toBe('天数 > 3 或 同时请部门负责人审批 = 是')
      expect(readableCondition({ kind: 'annual' }, conditionFields(labelled))).toBe('Kind = 年假')
    } finally {
      setLanguage('en', false)
    }
  })
  it('offers the operators that fit a type', () => {
    expect(opsFor('switch')).toEqual(['eq', 'ne', 'exists', 'notExists'])
    expect(opsFor('number')).toContain('gt')
    expect(opsFor('select')).not.toContain('gt')
    expect(opsFor(undefined)).toEqual([...OPS])
  })
  it('reads typed values as the field\'s type', () => {
    expect(typedValue('number', '3')).toBe(3)
    expect(typedValue('number', 'x')).toBe('x')
    expect(typedValue('money', ['1', '2'])).toEqual([1, 2])
    expect(typedValue('switch', 'true')).toBe(true)
    expect(typedValue('input', '3')).toBe('3')
  })
})

describe('the readable form of a condition', () => {
  afterEach(() => setLanguage('en'))
  const fields = [
    { path: 'days', label: '天数' },
    { path: 'type', label: '类型', options: [{ label: '年假', value: 'annual' }] },
    { path: 'lead_review.escalate', label: '上报' },
  ]
  const q = { $or: [{ days: { $gt: 3 } }, { 'lead_review.escalate': true }] }
  it('in Chinese: labels, symbols and 或/是', () => {
    setLanguage('zh-CN')
    expect(readableCondition(q, fields)).toBe('天数 > 3 或 上报 = 是')
    expect(readableCondition({ type: 'annual', days: { $gte: 1, $lte: 5 } }, fields)).toBe('类型 = 年假 且 (天数 ≥ 1 且 天数 ≤ 5)')
    expect(readableCondition({ type: { $in: ['annual', 'sick'] } }, fields)).toBe('类型 属于 [年假,sick]')
    expect(readableCondition({ days: { $exists: false } }, fields)).toBe('天数 未填写')
  })
  it('in English', () => {
    setLanguage('en')
    expect(readableCondition(q, fields)).toBe('天数 > 3 or 上报 = yes')
    expect(readableCondition({ amount: { $ne: 5 } })).toBe('amount ≠ 5')
    expect(readableCondition({ $and: [{ a: 1 }, { $or: [{ b: 2 }, { c: 3 }] }] })).toBe('a = 1 and (b = 2 or c = 3)')
  })
  it('is empty for no condition', () => {
    expect(readableCondition(undefined)).toBe('')
    expect(readableCondition({})).toBe('')
  })
})
