// The rules of a task's actions (API.md "Tasks"): which a person may take on a task, what each needs before it is
// sent, and how it is sent. Plain functions, so that the desktop and the phone task page cannot drift apart:
// composables/useTaskActions.ts puts them on a page, the pages only choose how they look and what they say.
import type { InstanceStatus, Task } from '@/api'

/** Everything a person may do with a task from a task page. On a resubmit task (the initiator's, after a return to
 * the start) approve resubmits and reject withdraws: the engine decides that, the actions are the same. */
export type TaskAction = 'approve' | 'reject' | 'transfer' | 'add-sign' | 'return' | 'reclaim'

/** Where added signers sign: before the assignee, after, or together with them (加签). */
export type SignPosition = 'before' | 'after' | 'parallel'

/** Who looks at the task. */
export interface Viewer {
  username?: string
  admin: boolean
}

/** The task as the rules need it. */
export type TaskFacts = Pick<Task, 'status' | 'assignee'> & { kind?: string }

/** isMine: the task is the viewer's to act on (its assignee, or an admin, who may act on anyone's). */
export function isMine(task: TaskFacts | null | undefined, viewer: Viewer): boolean {
  return !!task && (task.assignee === viewer.username || viewer.admin)
}

/** mayDecide: the viewer may decide the task — approve, reject, transfer, add signers, return — while it is
 * pending, theirs, and its request runs. */
export function mayDecide(task: TaskFacts | null | undefined, instanceStatus: InstanceStatus | undefined, viewer: Viewer): boolean {
  return !!task && task.status === 'pending' && isMine(task, viewer) && instanceStatus === 'running'
}

/** mayReclaim: the viewer may take back (追回) a decision they made themselves — an admin too only on their own —
 * while the request runs. The server still refuses (409) once a later step decided. */
export function mayReclaim(task: TaskFacts | null | undefined, instanceStatus: InstanceStatus | undefined, viewer: Viewer): boolean {
  return !!task && (task.status === 'approved' || task.status === 'rejected') && !!viewer.username && task.assignee === viewer.username && instanceStatus === 'running'
}

/** An action a page offers, and when it is shown but cannot be taken, why (a message key). */
export interface Offer {
  action: TaskAction
  disabledBy?: string
}

/** The decisions on a pending task, in the order the pages show them. */
export const DECISIONS: readonly TaskAction[] = ['approve', 'reject', 'transfer', 'add-sign', 'return']

/** offers lists what a page offers on a task: the decisions while the viewer may decide (return only when the
 * engine named a step to return to), else reclaim when they may take their decision back, else nothing. */
export function offers(task: TaskFacts | null | undefined, instanceStatus: InstanceStatus | undefined, viewer: Viewer, returnTargets: number): Offer[] {
  if (mayDecide(task, instanceStatus, viewer)) {
    // A request returned to its applicant: resubmit (approve) or withdraw (reject) — never the approver's buttons.
    if (isResubmit(task)) return [{ action: 'approve' }, { action: 'reject' }]
    return DECISIONS.map((action) => (action === 'return' && returnTargets === 0 ? { action, disabledBy: 'actions.noReturnTarget' } : { action }))
  }
  if (mayReclaim(task, instanceStatus, viewer)) return [{ action: 'reclaim' }]
  return []
}

/** isResubmit: the task is the applicant's, after their request was returned to the start (重新提交 / 撤回). */
export function isResubmit(task: TaskFacts | null | undefined): boolean {
  return task?.kind === 'resubmit'
}

/** What a person fills in before an action is sent. */
export interface Draft {
  comment: string
  /** transfer: the one who takes over (the first); add-sign: who signs */
  users: string[]
  position: SignPosition
  /** return: the node to return to */
  target: string
  /** approve, reject: files that go with the comment (uploaded attachments, as a file field holds them) */
  files: unknown[]
}

/** emptyDraft is a fresh draft: no comment, nobody chosen, signers after the assignee, the first return target. */
export function emptyDraft(firstTarget = ''): Draft {
  return { comment: '', users: [], position: 'after', target: firstTarget, files: [] }
}

/** What a draft lacks: a comment, someone, a step, or — for approve — the approver's form filled in (its first
 * problem, as the form says it). */
export type DraftProblem = { need: 'comment' | 'users' | 'target' } | { need: 'form'; message: string }

/** draftProblem is the first thing an action's draft lacks, or undefined when it may be sent: reject and return
 * need a comment (the applicant reads why), transfer and add-sign someone, return a step, and approve a form with
 * no errors left (formErrors: field id → message, of the fields the approver may fill in). */
export function draftProblem(action: TaskAction, d: Draft, formErrors: Record<string, string> = {}, resubmit = false): DraftProblem | undefined {
  // An applicant withdrawing their own returned request owes nobody a reason.
  if (((action === 'reject' && !resubmit) || action === 'return') && !d.comment.trim()) return { need: 'comment' }
  if ((action === 'transfer' || action === 'add-sign') && !d.users.length) return { need: 'users' }
  if (action === 'return' && !d.target) return { need: 'target' }
  if (action === 'approve') {
    const first = Object.values(formErrors)[0]
    if (first) return { need: 'form', message: first }
  }
  return undefined
}

/** The endpoints the actions are sent to (api/index.ts has them; a test gives its own). */
export interface TaskActionApi {
  approve(id: string, comment: string, data?: Record<string, unknown>, attachments?: string[]): Promise<unknown>
  reject(id: string, comment: string, attachments?: string[]): Promise<unknown>
  transfer(id: string, to: string, comment: string): Promise<unknown>
  addSign(id: string, users: string[], position: SignPosition, comment: string): Promise<unknown>
  returnTo(id: string, to: string, comment: string): Promise<unknown>
  reclaim(id: string, comment: string): Promise<unknown>
}

/** sendAction sends one action on a task with its draft (the comment trimmed); data is what approve writes through
 * the approver's form (only its editable fields). Check the draft with draftProblem first. */
export function sendAction(api: TaskActionApi, taskId: string, action: TaskAction, d: Draft, data?: Record<string, unknown>): Promise<unknown> {
  const c = d.comment.trim()
  const ids = attachmentIds(d.files)
  switch (action) {
    case 'approve':
      return ids.length ? api.approve(taskId, c, data, ids) : api.approve(taskId, c, data)
    case 'reject':
      return ids.length ? api.reject(taskId, c, ids) : api.reject(taskId, c)
    case 'transfer':
      return api.transfer(taskId, d.users[0], c)
    case 'add-sign':
      return api.addSign(taskId, d.users, d.position, c)
    case 'return':
      return api.returnTo(taskId, d.target, c)
    case 'reclaim':
      return api.reclaim(taskId, c)
  }
}

/** attachmentIds are the ids of the uploaded files of a draft. */
export function attachmentIds(files: unknown[] | undefined): string[] {
  return (files ?? []).flatMap((f) => (f && typeof f === 'object' && typeof (f as { id?: unknown }).id === 'string' ? [(f as { id: string }).id] : []))
}
