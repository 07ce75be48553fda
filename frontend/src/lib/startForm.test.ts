import { describe, expect, it } from 'vitest'
import { readFileSync, readdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { startFormOf, walkCondition } from './startForm'
import { validateValues, initialValues, valuesToContext } from './form'
import type { Definition } from './definition'

const templatesDir = resolve(__dirname, '../../../templates')
const template = (key: string) => JSON.parse(readFileSync(resolve(templatesDir, `${key}.json`), 'utf8')) as { key: string; definition: Definition }

describe('startFormOf', () => {
  it('uses a form start trigger\'s own form', () => {
    const sf = startFormOf(template('expense-form').definition)!
    expect(sf.generated).toBe(false)
    expect(sf.schema.fields!.map((f) => f.field)).toEqual(['amount', 'reason', 'receipts'])
  })

  it('generates the leave request\'s form from what its approvers read and its conditions test', () => {
    const sf = startFormOf(template('leave').definition)!
    expect(sf.generated).toBe(true)
    const fields = sf.schema.fields!
    // days, from and reason are shown read-only to the approvers; the deputy and the escalation are the lead's own
    // fields (editable in the lead's form), so the applicant is not asked for them.
    expect(fields.map((f) => [f.field, f.type, f.required])).toEqual([
      ['days', 'number', true],
      ['from', 'date', true],
      ['reason', 'textarea', true],
    ])
    expect(fields.map((f) => f.label)).toEqual(['Days', 'First day', 'Reason'])
    // The labels in both languages come along from the approvers' forms.
    expect(fields.map((f) => f.i18n?.['zh-CN']?.label)).toEqual(['天数', '开始日期', '请假事由'])
    expect(fields.every((f) => !f.readonly)).toBe(true)
    expect(new Set(fields.map((f) => f.id)).size).toBe(fields.length)
  })

  it('types the fields a condition tests by the values they are compared with', () => {
    const def: Definition = {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'manual' } },
        { id: 'a', type: 'approval', approvers: { context: 'reviewers' } },
        { id: 'b', type: 'approval', approvers: { users: ['x'] }, cc: { context: 'watchers' } },
        { id: 'end', type: 'end' },
      ],
      edges: [
        { from: 'start', to: 'a', condition: { $and: [{ amount: { $gte: 1000 } }, { urgent: true }] } },
        { from: 'start', to: 'b', condition: { $or: [{ region: { $in: ['north', 'south'] } }, { 'trip.start': { $lt: '2030-01-01' } }, { 'a.note': 'x' }] } },
        { from: 'a', to: 'end', condition: { cost_centre: { $eq: 'R&D' }, level: { $not: { $gt: 2 } } } },
        { from: 'b', to: 'end', default: true },
      ],
    }
    const fields = startFormOf(def)!.schema.fields!
    const byPath = Object.fromEntries(fields.map((f) => [f.field, f]))
    expect(Object.keys(byPath)).toEqual(['reviewers', 'watchers', 'amount', 'urgent', 'region', 'trip.start', 'cost_centre', 'level'])
    expect(byPath.reviewers.type).toBe('user')
    expect(byPath.reviewers.multiple).toBe(true)
    expect(byPath.amount.type).toBe('number')
    expect(byPath.urgent.type).toBe('switch')
    expect(byPath.urgent.required).toBe(false)
    expect(byPath.region.type).toBe('select')
    expect(byPath.region.options).toEqual([{ label: 'north', value: 'north' }, { label: 'south', value: 'south' }])
    expect(byPath['trip.start'].type).toBe('date')
    expect(byPath['trip.start'].id).toBe('trip_start')
    expect(byPath['trip.start'].label).toBe('start')
    expect(byPath.cost_centre.type).toBe('input')
    expect(byPath.cost_centre.label).toBe('cost centre')
    expect(byPath.level.type).toBe('number')
    // a.note is data the node a stores: not asked of the applicant.
    expect(byPath['a.note']).toBeUndefined()
  })

  it('asks nothing when the process reads nothing, and nothing of automatic starts', () => {
    expect(startFormOf({ nodes: [{ id: 'start', type: 'start', trigger: { kind: 'manual' } }, { id: 'end', type: 'end' }], edges: [{ from: 'start', to: 'end' }] })).toBeUndefined()
    expect(
      startFormOf({
        nodes: [{ id: 'start', type: 'start', trigger: { kind: 'crontab', expr: '0 * * * *' } }, { id: 'end', type: 'end' }],
        edges: [{ from: 'start', to: 'end', condition: { days: { $gt: 1 } } }],
      }),
    ).toBeUndefined()
    expect(startFormOf(undefined)).toBeUndefined()
  })

  it('gives a form that an invalid entry does not pass and a valid one turns into the context', () => {
    const schema = startFormOf(template('leave').definition)!.schema
    const values = initialValues(schema, {})
    expect(Object.keys(validateValues(schema, values)).sort()).toEqual(['days', 'from', 'reason'])
    values.days = 3
    values.from = '2030-05-02'
    values.reason = '家里有事'
    expect(validateValues(schema, values)).toEqual({})
    expect(valuesToContext(schema, values)).toEqual({ days: 3, from: '2030-05-02', reason: '家里有事' })
  })

  it('gives every ready-made template that people start by hand a start form', () => {
    for (const file of readdirSync(templatesDir).filter((f) => f.endsWith('.json'))) {
      const t = JSON.parse(readFileSync(resolve(templatesDir, file), 'utf8')) as { key: string; definition: Definition }
      const kind = t.definition.nodes?.find((n) => n.type === 'start')?.trigger?.kind
      const sf = startFormOf(t.definition)
      if (kind === 'manual' || kind === 'form') {
        expect(sf, `${t.key} has no start form`).toBeDefined()
        expect(sf!.schema.fields!.length, t.key).toBeGreaterThan(0)
      }
    }
  })
})

describe('walkCondition', () => {
  it('skips operators and walks nested groups', () => {
    const seen: string[] = []
    walkCondition({ $nor: [{ x: 1 }], $where: 'y', z: { $exists: true } }, (p, t) => seen.push(`${p}:${t}`))
    expect(seen).toEqual(['x:number', 'z:input'])
  })
})

describe('the resubmit task of a manual start', () => {
  it('is shown through the generated start form, and the return found in the history', async () => {
    const { nodeForm, lastReturn } = await import('@/composables/useTask')
    const def = template('leave').definition
    expect(nodeForm(def, 'start')?.fields?.map((f) => f.field)).toEqual(['days', 'from', 'reason'])
    const h = [
      { at: '1', action: 'task.returned', actor: 'bob', comment: 'first', data: { from: 'manager', to: 'lead' } },
      { at: '2', action: 'task.returned', actor: 'carol', comment: '请改成 3 天', data: { from: 'lead', to: 'start' } },
      { at: '3', action: 'task.created', actor: 'system' },
    ]
    expect(lastReturn(h, 'start')?.comment).toBe('请改成 3 天')
    expect(lastReturn(h.slice(0, 1), 'start')).toBeUndefined()
  })
})
