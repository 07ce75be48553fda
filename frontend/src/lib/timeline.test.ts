import { describe, expect, it } from 'vitest'
import type { HistoryItem } from '@/api'
import { buildTimeline, changesOf, fieldsByPath, initials } from './timeline'
import type { FormSchema } from './form'

const start: FormSchema = {
  kind: 'components',
  fields: [
    { id: 'days', type: 'number', label: '天数', field: 'days' },
    { id: 'kind', type: 'select', label: '类型', field: 'kind', options: [{ label: '年假', value: 'annual' }, { label: '病假', value: 'sick' }] },
  ],
}
const lead: FormSchema = { kind: 'components', fields: [{ id: 'deputy', type: 'user', label: '代理人', field: 'lead_review.deputy' }, { id: 'days', type: 'number', label: 'Days (lead)', field: 'days', readonly: true }] }

const h = (action: string, actor: string, extra: Partial<HistoryItem> = {}): HistoryItem => ({ at: '2026-11-28T10:00:00Z', action, actor, ...extra })

// Two approvals, as the engine writes them: 17 items, 2 of them decisions, with the engine's steps credited to
// whoever's call caused them.
const leave: HistoryItem[] = [
  h('instance.started', 'alice', { data: { template: 'leave', version: 1 } }),
  h('node.activated', 'alice', { node_id: 'start' }),
  h('node.completed', 'alice', { node_id: 'start' }),
  h('node.activated', 'alice', { node_id: 'lead' }),
  h('task.created', 'alice', { node_id: 'lead', task_id: 't1', data: { assignee: 'bob' } }),
  h('task.approved', 'bob', { node_id: 'lead', task_id: 't1', comment: '请和 Hana 做好交接', data: { assignee: 'bob' } }),
  h('context.changed', 'bob', { node_id: 'lead', task_id: 't1', data: { changes: [{ path: 'lead_review.deputy', before: null, after: '"hana"' }] } }),
  h('node.completed', 'bob', { node_id: 'lead' }),
  h('node.activated', 'bob', { node_id: 'manager' }),
  h('task.created', 'bob', { node_id: 'manager', task_id: 't2', data: { assignee: 'carol' } }),
  h('task.auto_approved', 'system', { node_id: 'manager', task_id: 't2', data: { reason: 'dedupe' } }),
  h('node.completed', 'system', { node_id: 'manager' }),
  h('task.approved', 'dave', { node_id: 'hr', task_id: 't3', data: { assignee: 'erin', on_behalf_of: 'erin' } }),
  h('node.activated', 'dave', { node_id: 'end' }),
  h('cc.sent', 'dave', { node_id: 'end', data: { users: ['hr1'] } }),
  h('node.completed', 'dave', { node_id: 'end' }),
  h('instance.completed', 'dave'),
]

describe('buildTimeline', () => {
  it('makes one entry per human act, automatic decision and outcome, and folds the engine’s steps', () => {
    const { entries, before } = buildTimeline(leave, fieldsByPath([start, lead]))
    expect(before).toEqual([])
    expect(entries.map((e) => [e.kind, e.item.action, e.item.actor])).toEqual([
      ['act', 'instance.started', 'alice'],
      ['act', 'task.approved', 'bob'],
      ['auto', 'task.auto_approved', 'system'],
      ['act', 'task.approved', 'dave'],
      ['outcome', 'instance.completed', 'dave'],
    ])
    // Nobody is credited with "created a task" or "copied": those are folded under the act that caused them.
    expect(entries[0].engine.map((x) => x.action)).toEqual(['node.activated', 'node.completed', 'node.activated', 'task.created'])
    expect(entries[3].engine.map((x) => x.action)).toEqual(['node.activated', 'cc.sent', 'node.completed'])
    expect(entries.flatMap((e) => e.engine).length + entries.length).toBe(leave.length - 1) // context.changed is merged
    expect(entries[1].changes).toEqual([{ label: '代理人', before: '—', after: 'hana' }])
    expect(entries[1].item.comment).toBe('请和 Hana 做好交接')
    expect(entries[2].reason).toBe('dedupe')
    expect(entries[3].onBehalfOf).toBe('erin')
  })

  it('says a resubmission’s field changes with labels and option labels, never paths or JSON', () => {
    const items = [
      h('instance.resubmitted', 'alice', { node_id: 'start', task_id: 't4' }),
      h('context.changed', 'alice', { node_id: 'start', task_id: 't4', data: { changes: [{ path: 'days', before: '5', after: '3' }, { path: 'kind', before: '"annual"', after: '"sick"' }, { path: 'note', before: null, after: '"x"' }] } }),
    ]
    const { entries } = buildTimeline(items, fieldsByPath([start, lead]), (p) => `«${p}»`)
    expect(entries).toHaveLength(1)
    expect(entries[0].changes).toEqual([
      { label: '天数', before: '5', after: '3' },
      { label: '类型', before: '年假', after: '病假' },
      { label: '«note»', before: '—', after: 'x' },
    ])
  })

  it('keeps a failure as one outcome, and steps before any act apart', () => {
    const { entries, before } = buildTimeline([
      h('node.activated', 'system:cron', { node_id: 'start' }),
      h('instance.started', 'system:cron'),
      h('node.failed', 'system:cron', { node_id: 'lead', data: { code: 'no_approver' } }),
      h('instance.failed', 'system:cron'),
    ])
    expect(before.map((x) => x.action)).toEqual(['node.activated'])
    expect(entries.map((e) => e.item.action)).toEqual(['instance.started', 'node.failed'])
  })

  it('reads delegated tasks and timeouts as acts on behalf of someone and automatic decisions', () => {
    const { entries } = buildTimeline([h('task.approved', 'dan', { data: { delegated_from: 'bob' } }), h('node.timeout_approved', 'system', { node_id: 'lead' })])
    expect(entries[0].onBehalfOf).toBe('bob')
    expect(entries[1].kind).toBe('auto')
    expect(entries[1].reason).toBe('timeout')
  })
})

describe('changesOf and initials', () => {
  it('ignores items without changes', () => {
    expect(changesOf(h('context.changed', 'x', { data: {} }), new Map())).toEqual([])
  })
  it('takes the first letters of a Latin name and the first character of any other', () => {
    expect(initials('Bob Lead')).toBe('BL')
    expect(initials('alice')).toBe('A')
    expect(initials('王 Bob')).toBe('王')
    expect(initials('  ')).toBe('?')
  })
})

describe('a resubmission as the engine writes it', () => {
  it('is one act: the change first, the resubmit task’s approval and the request’s resubmit folded together', () => {
    const items = [
      h('task.returned', 'ben', { node_id: 'lead', task_id: 't1', comment: '改成 3 天' }),
      h('context.changed', 'pia', { node_id: 'start', task_id: 't2', data: { changes: [{ path: 'days', before: '5', after: '3' }] } }),
      h('task.approved', 'pia', { node_id: 'start', task_id: 't2' }),
      h('node.completed', 'pia', { node_id: 'start' }),
      h('instance.resubmitted', 'pia', { node_id: 'start' }),
      h('task.created', 'pia', { node_id: 'lead', task_id: 't3' }),
    ]
    const { entries } = buildTimeline(items, fieldsByPath([start]))
    expect(entries.map((e) => e.item.action)).toEqual(['task.returned', 'instance.resubmitted'])
    expect(entries[1].changes).toEqual([{ label: '天数', before: '5', after: '3' }])
    expect(entries[1].engine.map((x) => x.action)).toEqual(['task.created'])
  })
})
