import { beforeEach, describe, expect, it } from 'vitest'
import { ref } from 'vue'
import type { Instance, ReturnTarget, Task } from '@/api'
import { ApiError } from '@/api/client'
import type { FormSchema } from '@/lib/form'
import type { Viewer } from '@/lib/taskActions'
import { recordingTaskApi } from '@/testing/taskApi'
import { desktopWording, phoneWording, useTaskActions, type TaskSource } from './useTaskActions'
import { setLanguage } from '@/i18n'
import { emptyDraft } from '@/lib/taskActions'

// The leave template's lead step: the request read-only, "who covers" for the lead to fill in.
const leadForm: FormSchema = {
  kind: 'components',
  fields: [
    { id: 'days', type: 'number', label: 'Days', field: 'days', readonly: true },
    { id: 'deputy', type: 'user', label: 'Who covers', field: 'lead_review.deputy', required: true },
  ],
}

/** page builds a task page around a pending task of bob's (or the task given) and a recording API. */
function page(over: { task?: Partial<Task>; status?: Instance['status']; viewer?: Viewer; targets?: ReturnTarget[]; fail?: unknown } = {}) {
  const { api, calls } = recordingTaskApi(over.fail)
  let loads = 0
  const said: string[] = []
  const values = ref<Record<string, unknown>>({ days: 3, deputy: '' })
  const src: TaskSource = {
    task: ref<Task | null>({ id: 't1', instance_id: 'i1', node_id: 'lead', assignee: 'bob', status: 'pending', ...over.task }),
    instance: ref({ id: 'i1', template: 'leave', version: 1, status: over.status ?? 'running' } as Instance),
    returnTargets: ref(over.targets ?? [{ node_id: 'start', name: 'Apply' }]),
    form: ref(leadForm),
    ownForm: ref(true),
    values,
    loadedValues: ref({ days: 3, deputy: '' }),
    load: async () => {
      loads++
    },
    approveData: () => (values.value.deputy ? { lead_review: { deputy: values.value.deputy } } : undefined),
  }
  const a = useTaskActions(src, {
    wording: {
      problem: (p, action) => `${action}:${p.need === 'form' ? p.message : p.need}`,
      done: (action, d) => `done ${action} ${d.users.join(',')}`,
    },
    succeeded: (m) => said.push(m),
    failed: (e) => said.push(`failed ${(e as Error).message}`),
    viewer: () => over.viewer ?? { username: 'bob', admin: false },
    api,
  })
  return { a, src, values, calls, said, loads: () => loads }
}

describe('useTaskActions', () => {
  it('opens the approver’s form while they may decide, and shows no error on it before they touch it', () => {
    const { a } = page()
    expect(a.editing.value).toBe(true)
    expect(a.formErrors.value).toEqual({ deputy: expect.stringContaining('Who covers') })
    expect(a.fieldErrors.value).toEqual({})
  })

  it('refuses an approve with the form’s first problem and shows every field error, then sends what was filled in', async () => {
    const p = page()
    p.a.start('approve')
    expect(await p.a.submit()).toBe(false)
    expect(p.calls).toEqual([])
    expect(p.a.problem.value).toMatch(/^approve:Who covers/)
    expect(p.a.fieldErrors.value).toEqual(p.a.formErrors.value)
    expect(p.a.open.value).toBe('approve')

    p.values.value = { ...p.values.value, deputy: 'carol' }
    p.a.draft.comment = ' ok '
    expect(await p.a.submit()).toBe(true)
    expect(p.calls).toEqual([['approve', 't1', 'ok', { lead_review: { deputy: 'carol' } }]])
    expect(p.said).toEqual(['done approve '])
    expect(p.a.open.value).toBe(null)
    expect(p.loads()).toBe(1)
  })

  it('does not hold a reject up on the form, but on its comment', async () => {
    const p = page()
    p.a.start('reject')
    expect(await p.a.submit()).toBe(false)
    expect(p.a.problem.value).toBe('reject:comment')
    expect(p.a.fieldErrors.value).toEqual({}) // only an approve shows the form's errors
    p.a.draft.comment = 'no'
    expect(await p.a.submit()).toBe(true)
    expect(p.calls).toEqual([['reject', 't1', 'no']])
  })

  it('starts each action from a fresh draft, the return target pre-chosen', async () => {
    const p = page({ targets: [{ node_id: 'lead' }, { node_id: 'start' }] })
    p.a.start('transfer')
    p.a.draft.users = ['carol']
    p.a.draft.comment = 'you take it'
    p.a.close()
    p.a.start('return')
    expect(p.a.draft).toEqual({ comment: '', users: [], position: 'after', target: 'lead', files: [] })
    p.a.draft.comment = 'check again'
    await p.a.submit()
    expect(p.calls).toEqual([['returnTo', 't1', 'lead', 'check again']])
  })

  it('says a refused action the page’s way and keeps the dialog open', async () => {
    const p = page({ fail: new ApiError(409, 'conflict', 'the task is no longer pending') })
    p.a.start('add-sign')
    p.a.draft.users = ['carol', 'dave']
    expect(await p.a.submit()).toBe(false)
    expect(p.calls).toEqual([['addSign', 't1', ['carol', 'dave'], 'after', '']])
    expect(p.said).toEqual(['failed the task is no longer pending'])
    expect(p.a.open.value).toBe('add-sign')
    expect(p.a.busy.value).toBe(false)
    expect(p.loads()).toBe(0)
  })

  it('offers reclaim on one’s own decision, with no form open', () => {
    const p = page({ task: { status: 'approved' } })
    expect(p.a.offered.value.map((o) => o.action)).toEqual(['reclaim'])
    expect(p.a.canReclaim.value).toBe(true)
    expect(p.a.editing.value).toBe(false)
    expect(p.a.formErrors.value).toEqual({})
  })

  it('offers nothing to someone else and tells the page it is not theirs', () => {
    const p = page({ viewer: { username: 'carol', admin: false } })
    expect(p.a.offered.value).toEqual([])
    expect(p.a.mine.value).toBe(false)
    expect(p.a.editing.value).toBe(false)
  })
})

describe('the pages’ wording', () => {
  beforeEach(() => setLanguage('en', false))
  const d = { ...emptyDraft(), users: ['carol'] }
  it('says a problem as a sentence on the desktop, short on a phone, and a form problem as the form does', () => {
    expect(desktopWording.problem({ need: 'comment' }, 'reject')).toBe('Say why you reject: the applicant will read it.')
    expect(desktopWording.problem({ need: 'comment' }, 'return')).toBe('Say why you return it.')
    expect(desktopWording.problem({ need: 'users' }, 'transfer')).toBe('Choose who takes over.')
    expect(desktopWording.problem({ need: 'users' }, 'add-sign')).toBe('Choose at least one user.')
    expect(phoneWording.problem({ need: 'comment' }, 'reject')).toBe('A comment is required')
    expect(phoneWording.problem({ need: 'users' }, 'transfer')).toBe('Choose someone')
    expect(phoneWording.problem({ need: 'target' }, 'return')).toBe('Choose a step')
    for (const w of [desktopWording, phoneWording]) expect(w.problem({ need: 'form', message: 'Who covers is required' }, 'approve')).toBe('Who covers is required')
  })
  it('names who took a task over on the desktop', () => {
    expect(desktopWording.done('transfer', d)).toBe('Transferred to carol')
    expect(phoneWording.done('transfer', d)).toBe('Transferred')
    expect(desktopWording.done('reclaim', d)).toBe('Decision taken back: the task is yours again')
    expect(phoneWording.done('approve', d)).toBe('Approved')
  })
})
