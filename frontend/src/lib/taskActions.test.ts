import { describe, expect, it } from 'vitest'
import type { InstanceStatus } from '@/api'
import { draftProblem, emptyDraft, isMine, isResubmit, mayDecide, mayReclaim, offers, sendAction, type Draft, type TaskAction, type TaskFacts, type Viewer } from './taskActions'
import { recordingTaskApi } from '@/testing/taskApi'

const bob: Viewer = { username: 'bob', admin: false }
const admin: Viewer = { username: 'root', admin: true }
const carol: Viewer = { username: 'carol', admin: false }
const task = (status: string, assignee = 'bob'): TaskFacts => ({ status, assignee })

describe('who may do what on a task', () => {
  const cases: { name: string; task: TaskFacts | null; inst?: InstanceStatus; viewer: Viewer; mine: boolean; decide: boolean; reclaim: boolean }[] = [
    { name: 'the assignee of a pending task of a running request', task: task('pending'), inst: 'running', viewer: bob, mine: true, decide: true, reclaim: false },
    { name: 'an admin on anyone’s pending task', task: task('pending'), inst: 'running', viewer: admin, mine: true, decide: true, reclaim: false },
    { name: 'someone else', task: task('pending'), inst: 'running', viewer: carol, mine: false, decide: false, reclaim: false },
    { name: 'a pending task of an ended request', task: task('pending'), inst: 'completed', viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'a waiting task (sequential sign, not yet its turn)', task: task('waiting'), inst: 'running', viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'the assignee’s approval while the request runs', task: task('approved'), inst: 'running', viewer: bob, mine: true, decide: false, reclaim: true },
    { name: 'the assignee’s rejection while the request runs', task: task('rejected'), inst: 'running', viewer: bob, mine: true, decide: false, reclaim: true },
    { name: 'an admin on someone else’s decision', task: task('approved'), inst: 'running', viewer: admin, mine: true, decide: false, reclaim: false },
    { name: 'an approval of an ended request', task: task('approved'), inst: 'rejected', viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'a transferred task', task: task('transferred'), inst: 'running', viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'a cancelled task', task: task('cancelled'), inst: 'running', viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'no task (still loading)', task: null, inst: 'running', viewer: bob, mine: false, decide: false, reclaim: false },
    { name: 'no instance yet', task: task('pending'), inst: undefined, viewer: bob, mine: true, decide: false, reclaim: false },
    { name: 'nobody signed in', task: task('approved'), inst: 'running', viewer: { admin: false }, mine: false, decide: false, reclaim: false },
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect([isMine(c.task, c.viewer), mayDecide(c.task, c.inst, c.viewer), mayReclaim(c.task, c.inst, c.viewer)]).toEqual([c.mine, c.decide, c.reclaim])
    })
  }
})

describe('offers', () => {
  it('offers the decisions in the pages’ order while the viewer may decide', () => {
    expect(offers(task('pending'), 'running', bob, 2)).toEqual([{ action: 'approve' }, { action: 'reject' }, { action: 'transfer' }, { action: 'add-sign' }, { action: 'return' }])
  })
  it('shows return disabled, saying why, when the engine names no step to return to', () => {
    expect(offers(task('pending'), 'running', bob, 0).find((o) => o.action === 'return')).toEqual({ action: 'return', disabledBy: 'actions.noReturnTarget' })
  })
  it('offers only reclaim on one’s own decision, and nothing to others', () => {
    expect(offers(task('approved'), 'running', bob, 0)).toEqual([{ action: 'reclaim' }])
    expect(offers(task('approved'), 'running', carol, 0)).toEqual([])
    expect(offers(task('pending'), 'running', carol, 3)).toEqual([])
    expect(offers(task('pending'), 'completed', bob, 3)).toEqual([])
  })
})

describe('draftProblem', () => {
  const d = (p: Partial<Draft>): Draft => ({ ...emptyDraft('lead'), ...p })
  const cases: { action: TaskAction; draft: Draft; formErrors?: Record<string, string>; want: ReturnType<typeof draftProblem> }[] = [
    { action: 'approve', draft: d({}), want: undefined },
    { action: 'approve', draft: d({}), formErrors: { deputy: 'Who covers is required', days: 'Days is required' }, want: { need: 'form', message: 'Who covers is required' } },
    { action: 'reject', draft: d({ comment: '  ' }), want: { need: 'comment' } },
    { action: 'reject', draft: d({ comment: 'too long' }), formErrors: { deputy: 'x' }, want: undefined },
    { action: 'return', draft: d({ comment: '' }), want: { need: 'comment' } },
    { action: 'return', draft: d({ comment: 'again', target: '' }), want: { need: 'target' } },
    { action: 'return', draft: d({ comment: 'again' }), want: undefined },
    { action: 'transfer', draft: d({}), want: { need: 'users' } },
    { action: 'transfer', draft: d({ users: ['carol'] }), want: undefined },
    { action: 'add-sign', draft: d({}), want: { need: 'users' } },
    { action: 'add-sign', draft: d({ users: ['carol', 'dave'] }), want: undefined },
    { action: 'reclaim', draft: d({}), want: undefined },
  ]
  for (const c of cases) {
    it(`${c.action} ${JSON.stringify(c.draft)} ${JSON.stringify(c.formErrors ?? {})}`, () => {
      expect(draftProblem(c.action, c.draft, c.formErrors)).toEqual(c.want)
    })
  }
  it('starts with no comment, nobody, signers after, the first return target', () => {
    expect(emptyDraft('lead')).toEqual({ comment: '', users: [], position: 'after', target: 'lead', files: [] })
    expect(emptyDraft().target).toBe('')
  })
})

describe('sendAction', () => {
  const draft: Draft = { comment: '  fine \n', users: ['carol', 'dave'], position: 'before', target: 'lead', files: [] }
  const cases: { action: TaskAction; want: unknown[] }[] = [
    { action: 'approve', want: ['approve', 't1', 'fine', { lead_review: { deputy: 'carol' } }] },
    { action: 'reject', want: ['reject', 't1', 'fine'] },
    { action: 'transfer', want: ['transfer', 't1', 'carol', 'fine'] },
    { action: 'add-sign', want: ['addSign', 't1', ['carol', 'dave'], 'before', 'fine'] },
    { action: 'return', want: ['returnTo', 't1', 'lead', 'fine'] },
    { action: 'reclaim', want: ['reclaim', 't1', 'fine'] },
  ]
  for (const c of cases) {
    it(`sends ${c.action} to its endpoint with the trimmed comment`, async () => {
      const { api, calls } = recordingTaskApi()
      await sendAction(api, 't1', c.action, draft, { lead_review: { deputy: 'carol' } })
      expect(calls).toEqual([c.want])
    })
  }
  it('sends the ids of the files that go with an approval or a rejection', async () => {
    const { api, calls } = recordingTaskApi()
    const files = [{ id: 'att_0123456789abcdef0123456789abcdef', name: 'a.png', size: 3 }, { name: 'no id' }]
    await sendAction(api, 't1', 'approve', { ...draft, files })
    await sendAction(api, 't1', 'reject', { ...draft, files })
    await sendAction(api, 't1', 'transfer', { ...draft, files })
    expect(calls).toEqual([
      ['approve', 't1', 'fine', undefined, ['att_0123456789abcdef0123456789abcdef']],
      ['reject', 't1', 'fine', ['att_0123456789abcdef0123456789abcdef']],
      ['transfer', 't1', 'carol', 'fine'],
    ])
  })
})

describe('a request returned to its applicant', () => {
  const resubmit: TaskFacts = { status: 'pending', assignee: 'bob', kind: 'resubmit' }
  it('offers resubmit (approve) and withdraw (reject) only, never the approver’s other buttons', () => {
    expect(isResubmit(resubmit)).toBe(true)
    expect(isResubmit(task('pending'))).toBe(false)
    expect(offers(resubmit, 'running', bob, 3)).toEqual([{ action: 'approve' }, { action: 'reject' }])
    expect(offers(resubmit, 'running', carol, 3)).toEqual([])
  })
  it('lets the applicant withdraw without a reason, while an approver’s reject still needs one', () => {
    expect(draftProblem('reject', emptyDraft(), {}, true)).toBeUndefined()
    expect(draftProblem('reject', emptyDraft(), {}, false)).toEqual({ need: 'comment' })
    expect(draftProblem('approve', emptyDraft(), { days: 'Days is required' }, true)).toEqual({ need: 'form', message: 'Days is required' })
  })
})
