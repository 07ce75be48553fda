// The inbox: my pending tasks with their instance's title, template and initiator. The task shape of the API
// carries none of these, so they come from the instances (fetched once each, in parallel) unless the server
// already put them on the task.
import { api, type Instance, type Task, type TemplateSummary } from '@/api'
import { t as tr } from '@/i18n'
import { instanceTitle, templateText } from '@/lib/labels'
import type { Definition } from '@/lib/definition'
import { versionDefinition } from './useTask'

export interface InboxRow {
  task: Task
  title: string
  template: string
  initiator: string
  instance?: Instance
  /** the definition of the task's template (its instance's version, else the latest): names its step in the
   * user's language (labels.ts stepName); undefined when the user may not read it */
  definition?: Definition
}

// Template names by key, in the user's language (the templates are fetched once per page load): lists show a
// process by its name, not its key.
let templates: Promise<TemplateSummary[]> | undefined
function templateSummaries(): Promise<TemplateSummary[]> {
  templates ??= api.templates().catch(() => [])
  return templates
}
export async function templateNames(): Promise<Map<string, string>> {
  return new Map((await templateSummaries()).map((t) => [t.key, templateText(t).name]))
}

/** loadInbox lists my tasks — the pending ones (the default), or those I decided (handled) — with their request's
 * title, the process's name and the initiator. */
export async function loadInbox(which: 'pending' | 'handled' = 'pending'): Promise<InboxRow[]> {
  const all = await api.tasks({ assignee: 'me', status: which === 'pending' ? 'pending' : 'all' })
  const tasks = which === 'pending' ? all : all.filter((t) => t.status === 'approved' || t.status === 'rejected' || t.status === 'transferred')
  const byKey = await templateNames()
  const need = [...new Set(tasks.filter((t) => !(t.template && t.initiator)).map((t) => t.instance_id))]
  const instances = new Map<string, Instance>()
  // A few at a time: an inbox of hundreds must not open hundreds of connections.
  for (let i = 0; i < need.length; i += 8) {
    const batch = await Promise.all(need.slice(i, i + 8).map((id) => api.instance(id).catch(() => undefined)))
    batch.forEach((inst) => inst && instances.set(inst.id, inst))
  }
  // The definitions the steps are named from, one request per template version (cached for the page load).
  const latest = new Map((await templateSummaries()).map((t) => [t.key, t.latest_version]))
  const versionOf = (t: Task) => {
    const inst = instances.get(t.instance_id)
    const key = t.template || inst?.template || ''
    const v = inst?.version ?? latest.get(key)
    return key && v ? ([key, v] as const) : undefined
  }
  const defs = new Map<string, Definition | undefined>()
  await Promise.all(
    [...new Set(tasks.map((t) => versionOf(t)?.join('@')).filter((k): k is string => !!k))].map(async (k) => {
      const at = k.lastIndexOf('@')
      defs.set(k, await versionDefinition(k.slice(0, at), Number(k.slice(at + 1))))
    }),
  )
  return tasks
    .map((t) => {
      const inst = instances.get(t.instance_id)
      return {
        definition: defs.get(versionOf(t)?.join('@') ?? ''),
        task: t,
        instance: inst,
        title: instanceTitle(inst) || t.instance_title || t.title || tr('inbox.untitled', { template: inst?.template ?? t.template ?? '', id: t.instance_id.slice(0, 8) }),
        template: byKey.get(t.template || inst?.template || '') || t.template || inst?.template || '',
        initiator: t.initiator || inst?.initiator || '',
      }
    })
    .sort((a, b) =>
      which === 'pending'
        ? String(a.task.created_at ?? '').localeCompare(String(b.task.created_at ?? ''))
        : String(b.task.decided_at ?? '').localeCompare(String(a.task.decided_at ?? '')),
    )
}
