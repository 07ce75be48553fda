// The actions on a task, for the desktop and the phone task page alike: what the viewer may do (lib/taskActions.ts),
// the approver's own form while they may decide (open, checked, its errors shown), the action being filled in, and
// its sending. A page renders it its own way (a dialog, a bottom sheet) and words it as the desktop or a phone does.
import { computed, reactive, ref, type Ref } from 'vue'
import { api, type Instance, type ReturnTarget, type Task } from '@/api'
import { t } from '@/i18n'
import { shownErrors, validateValues, type FormSchema } from '@/lib/form'
import { draftProblem, emptyDraft, isMine, isResubmit, mayDecide, mayReclaim, offers, sendAction, type Draft, type DraftProblem, type TaskAction, type TaskActionApi, type Viewer } from '@/lib/taskActions'
import { session } from '@/stores/session'

/** What the actions need of the page's task (composables/useTask.ts gives all of it). */
export interface TaskSource {
  task: Ref<Task | null>
  instance: Ref<Instance | null>
  returnTargets: Ref<ReturnTarget[]>
  /** the form the task is shown through */
  form: Ref<FormSchema | undefined>
  /** the task may write through that form (its editable fields are open) */
  ownForm: Ref<boolean>
  values: Ref<Record<string, unknown>>
  loadedValues: Ref<Record<string, unknown>>
  load: () => Promise<void>
  approveData: () => Record<string, unknown> | undefined
}

/** How a page words what a draft lacks and what an action did. */
export interface TaskActionWording {
  problem: (p: DraftProblem, action: TaskAction) => string
  done: (action: TaskAction, d: Draft) => string
}

const keyed = (keys: Record<TaskAction, string>) => (a: TaskAction, d: Draft) => t(keys[a], { user: d.users[0] ?? '' })

/** The desktop's words: a sentence each, the new assignee named. */
export const desktopWording: TaskActionWording = {
  problem: (p, a) => {
    switch (p.need) {
      case 'comment':
        return a === 'reject' ? t('actions.whyReject') : t('actions.whyReturn')
      case 'users':
        return a === 'transfer' ? t('actions.chooseTakeover') : t('actions.chooseUsers')
      case 'target':
        return t('actions.chooseStep')
      case 'form':
        return p.message
    }
  },
  done: keyed({
    approve: 'actions.done.approve',
    reject: 'actions.done.reject',
    transfer: 'actions.done.transferTo',
    'add-sign': 'actions.done.addSign',
    return: 'actions.done.return',
    reclaim: 'actions.done.reclaimDesktop',
  }),
}

/** A phone's words: short, for a field's error line and a toast. */
export const phoneWording: TaskActionWording = {
  problem: (p) => {
    switch (p.need) {
      case 'comment':
        return t('actions.commentNeeded')
      case 'users':
        return t('actions.chooseSomeone')
      case 'target':
        return t('actions.chooseAStep')
      case 'form':
        return p.message
    }
  },
  done: keyed({
    approve: 'actions.done.approve',
    reject: 'actions.done.reject',
    transfer: 'actions.done.transfer',
    'add-sign': 'actions.done.addSign',
    return: 'actions.done.return',
    reclaim: 'actions.done.reclaim',
  }),
}

export interface TaskActionsOptions {
  /** the page's words (desktopWording, phoneWording) */
  wording: TaskActionWording
  /** tells the person an action went through, in the wording's words (a message, a toast) */
  succeeded: (message: string) => void
  /** tells them it did not */
  failed: (err: unknown) => void
  /** who looks (default: the signed-in user) */
  viewer?: () => Viewer
  /** where actions are sent (default: the API) */
  api?: TaskActionApi
}

/** resubmitDone says what an applicant's resubmit (approve) or withdraw (reject) of a returned request did. */
const resubmitDone = (a: TaskAction) => t(a === 'approve' ? 'actions.done.resubmit' : 'actions.done.withdraw')

const signedIn = (): Viewer => ({ username: session.state.me?.username, admin: session.isAdmin.value })

export function useTaskActions(t: TaskSource, o: TaskActionsOptions) {
  const viewer = computed(o.viewer ?? signedIn)
  const send = o.api ?? api
  const status = computed(() => t.instance.value?.status)

  const mine = computed(() => isMine(t.task.value, viewer.value))
  const canDecide = computed(() => mayDecide(t.task.value, status.value, viewer.value))
  const canReclaim = computed(() => mayReclaim(t.task.value, status.value, viewer.value))
  const offered = computed(() => offers(t.task.value, status.value, viewer.value, t.returnTargets.value.length))
  const offer = (a: TaskAction) => offered.value.find((x) => x.action === a)

  // The approver's form: open while they may decide; only its editable fields are checked (and sent).
  const editing = computed(() => canDecide.value && t.ownForm.value && t.form.value?.kind === 'components')
  const formErrors = computed(() => (editing.value ? validateValues(t.form.value, t.values.value, true) : {}))
  // Under each field: its error once the approver changed it, every error once they tried to approve.
  const triedApprove = ref(false)
  const fieldErrors = computed(() => shownErrors(formErrors.value, t.values.value, t.loadedValues.value, triedApprove.value))

  /** the action being filled in, null when none */
  const open = ref<TaskAction | null>(null)
  const draft = reactive<Draft>(emptyDraft())
  /** what the draft lacks, in the page's words ('' when nothing) */
  const problem = ref('')
  const busy = ref(false)

  function start(a: TaskAction) {
    Object.assign(draft, emptyDraft(t.returnTargets.value[0]?.node_id))
    problem.value = ''
    open.value = a
  }

  function close() {
    open.value = null
  }

  /** submit checks the open action's draft and sends it; on success the dialog closes and the task reloads. */
  async function submit(): Promise<boolean> {
    const a = open.value
    const task = t.task.value
    if (!a || !task) return false
    problem.value = ''
    if (a === 'approve') triedApprove.value = true
    const resubmit = isResubmit(task)
    const p = draftProblem(a, draft, formErrors.value, resubmit)
    if (p) {
      problem.value = o.wording.problem(p, a)
      return false
    }
    busy.value = true
    try {
      await sendAction(send, task.id, a, draft, a === 'approve' ? t.approveData() : undefined)
      o.succeeded(resubmit && (a === 'approve' || a === 'reject') ? resubmitDone(a) : o.wording.done(a, draft))
      open.value = null
      await t.load()
      return true
    } catch (e) {
      o.failed(e)
      return false
    } finally {
      busy.value = false
    }
  }

  return { mine, canDecide, canReclaim, offered, offer, editing, formErrors, fieldErrors, triedApprove, open, draft, problem, busy, start, close, submit }
}

export type TaskActions = ReturnType<typeof useTaskActions>
