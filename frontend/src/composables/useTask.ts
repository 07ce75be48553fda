// Everything a task page shows, for the desktop and the phone page alike: the task, its instance, the form of
// its node (from the instance's template version), the history and the targets it may be returned to. What the
// viewer may do with it, and the doing, is useTaskActions.
import { computed, ref, shallowRef } from 'vue'
import { api, type HistoryItem, type Instance, type ReturnTarget, type Task } from '@/api'
import { errorMessage } from '@/api/client'
import type { DefNode, Definition } from '@/lib/definition'
import { initialValues, keepEdits, valuesToContext, type FormSchema } from '@/lib/form'
import { startFormOf } from '@/lib/startForm'

const versionCache = new Map<string, Promise<Definition | undefined>>()

/** versionDefinition fetches (once per page load) the definition an instance runs on. */
export function versionDefinition(template: string, version: number): Promise<Definition | undefined> {
  const key = `${template}@${version}`
  if (!versionCache.has(key)) {
    versionCache.set(
      key,
      api.version(template, version).then(
        (v) => v.definition,
        () => undefined, // a user who may not read templates still sees the raw context
      ),
    )
  }
  return versionCache.get(key)!
}

/** nodeForm picks the form a task is shown through: its node's form, else the start form (the template's own or
 * the one generated for it, lib/startForm.ts), else none. */
export function nodeForm(def: Definition | undefined, nodeId: string): FormSchema | undefined {
  const node: DefNode | undefined = def?.nodes.find((n) => n.id === nodeId)
  if (node?.form) return node.form
  return startFormOf(def)?.schema
}

/** lastReturn is the return that sent the request back to its applicant: who, why and when (the newest
 * task.returned to the start), or undefined. */
export function lastReturn(history: HistoryItem[], startId: string | undefined): HistoryItem | undefined {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i]
    if (h.action === 'task.returned' && (!startId || (h.data as { to?: string } | undefined)?.to === startId)) return h // i18n-ignore: a history action, not a message key
  }
  return undefined
}

/**
 * editableForm is the form whose editable fields a task's approve may write (API.md, "Security changes"): the
 * node's own component form, or for the initiator's resubmit task the start form. Other tasks write nothing
 * through a form (their data would land under context.<node_id>), so the page shows them the request read-only.
 */
export function editableForm(def: Definition | undefined, task: { node_id: string; kind?: string }): FormSchema | undefined {
  const own = task.kind === 'resubmit' ? nodeForm(def, task.node_id) : def?.nodes.find((n) => n.id === task.node_id)?.form
  if (own?.kind !== 'components' || !own.fields?.some((f) => f.field && !f.readonly)) return undefined
  return own
}

export function useTask(id: () => string) {
  const task = ref<Task | null>(null)
  const instance = ref<Instance | null>(null)
  const definition = shallowRef<Definition | undefined>()
  const history = ref<HistoryItem[]>([])
  const returnTargets = ref<ReturnTarget[]>([])
  const loading = ref(false)
  const error = ref('')
  const values = ref<Record<string, unknown>>({})
  /** the values as the last load gave them: what the approver changed is what differs (shownErrors, keepEdits) */
  const loadedValues = ref<Record<string, unknown>>({})
  const diagramVersion = ref(0)

  const form = computed(() => (task.value ? nodeForm(definition.value, task.value.node_id) : undefined))
  /** the form this task may write through (see editableForm): shown with its editable fields open */
  const ownForm = computed(() => !!task.value && !!editableForm(definition.value, task.value))
  const pending = computed(() => task.value?.status === 'pending')
  /** for the applicant's resubmit task: the return that sent it back (its comment is the reason) */
  const returned = computed(() =>
    task.value?.kind === 'resubmit' ? lastReturn(history.value, definition.value?.nodes.find((n) => n.type === 'start')?.id ?? task.value.node_id) : undefined,
  )

  async function load() {
    loading.value = true
    error.value = ''
    try {
      const t = await api.task(id())
      const sameTask = task.value?.id === t.id
      task.value = t
      const [inst, hist] = await Promise.all([api.instance(t.instance_id), api.history(t.instance_id).catch(() => [])])
      instance.value = inst
      history.value = hist
      definition.value = await versionDefinition(inst.template, inst.version)
      // A reload of the same task (the page refreshes itself, another approver acted) keeps what this approver
      // has typed; a new task starts from its own values.
      const fresh = initialValues(form.value, inst.context)
      values.value = sameTask ? keepEdits(values.value, loadedValues.value, fresh) : fresh
      loadedValues.value = fresh
      returnTargets.value = t.status === 'pending' ? await api.returnTargets(t.id).catch(() => []) : []
      diagramVersion.value++
    } catch (e) {
      error.value = errorMessage(e)
    } finally {
      loading.value = false
    }
  }

  /** approveData is what the approver entered in the editable fields of their form: only those are sent (the
   * server refuses any other field with 422 field_not_editable). */
  function approveData(): Record<string, unknown> | undefined {
    const f = task.value ? editableForm(definition.value, task.value) : undefined
    if (!f) return undefined
    const d = valuesToContext(f, values.value, true)
    return Object.keys(d).length ? d : undefined
  }

  return { task, instance, definition, history, returnTargets, loading, error, values, loadedValues, form, ownForm, pending, returned, diagramVersion, load, approveData }
}
