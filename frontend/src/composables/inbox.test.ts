import { afterEach, describe, expect, it, vi } from 'vitest'
import { setLanguage } from '@/i18n'
import { instanceTitle, stepName } from '@/lib/labels'

// The server's answers: a pending task of the ready-made leave request, version 2 of its template, with labels.
const leaveDef = {
  nodes: [
    { id: 'start', type: 'start', trigger: { kind: 'manual' } },
    { id: 'lead', type: 'approval', name: 'Team lead', i18n: { 'zh-CN': { name: '直属上级审批' } } },
  ],
  edges: [],
}
vi.mock('@/api', () => ({
  api: {
    tasks: vi.fn(async () => [
      { id: 'i1.t1', instance_id: 'i1', node_id: 'lead', node_name: 'Team lead', status: 'pending', template: 'leave', initiator: 'hana', title: 'Hana · 3 days', created_at: '2026-11-28T09:00:00Z' },
      { id: 'i2.t1', instance_id: 'i2', node_id: 'gone', node_name: 'Old step', status: 'pending', template: 'other', initiator: 'hana', created_at: '2026-11-28T10:00:00Z' },
    ]),
    templates: vi.fn(async () => [
      { key: 'leave', name: 'Leave', latest_version: 2, i18n: { 'zh-CN': { name: '请假申请' }, en: { name: 'Leave request' } } },
      { key: 'other', name: 'Other', latest_version: 1 },
    ]),
    version: vi.fn(async (key: string, v: number) => {
      if (key === 'leave' && v === 2) return { key, version: v, definition: leaveDef }
      throw new Error('forbidden') // a user who may not read the template: the step keeps the server's name
    }),
    instance: vi.fn(),
  },
}))

const { loadInbox, templateNames } = await import('./inbox')

afterEach(() => setLanguage('en', false))

describe('the inbox in the user\'s language', () => {
  it("names the process and the step from the template's labels, falling back to the server's names", async () => {
    const rows = await loadInbox()
    expect(rows.map((r) => r.template)).toEqual(['Leave request', 'Other'])
    setLanguage('zh-CN', false)
    expect(rows.map((r) => stepName(r.definition, r.task))).toEqual(['直属上级审批', 'Old step'])
    expect((await templateNames()).get('leave')).toBe('请假申请')
    setLanguage('en', false)
    expect(rows.map((r) => stepName(r.definition, r.task))).toEqual(['Team lead', 'Old step'])
    expect(instanceTitle({ title: rows[0].title })).toBe('Hana · 3 days')
  })
})
