// Typed calls for every endpoint of ../shared/API.md the UI uses. Where the contract leaves a response shape open
// (return targets, GET /forms), the reader here accepts the plausible shapes.
import type { Approvers, Definition, SignMode } from '@/lib/definition'
import type { FormSchema } from '@/lib/form'
import { formOf } from '@/lib/form'
import type { ValidationResult } from '@/lib/validation'
import { newIdempotencyKey, request, upload, type Query } from './client'

export interface Page<T> {
  items: T[]
  next_cursor?: string | null
}

export interface User {
  username: string
  display_name?: string
  roles: string[]
  department?: string
  manager?: string
  tenant?: string
  created_at?: string
}

export interface Department {
  name: string
  leader?: string
  parent?: string
}

export interface TemplateSummary {
  key: string
  name: string
  description?: string
  latest_version: number | null
}

export interface VersionSummary {
  version: number
  published_at?: string
  published_by?: string
}

export interface Template extends TemplateSummary {
  draft?: { definition: Definition; updated_at?: string; validation?: ValidationResult } | Definition | null
  versions?: (VersionSummary | number)[]
}

export interface TemplateVersion {
  key: string
  version: number
  definition: Definition
  published_at?: string
  published_by?: string
}

export type InstanceStatus = 'running' | 'completed' | 'rejected' | 'terminated' | 'failed' | 'withdrawn'

export interface NodeState {
  node_id: string
  name?: string
  type?: string
  state: string
  started_at?: string
  ended_at?: string
}

export interface Task {
  id: string
  instance_id: string
  node_id: string
  node_name?: string
  assignee: string
  status: string
  comment?: string
  created_at?: string
  decided_at?: string
  // Not in the contract's task shape; used when the server adds them to spare one request per task.
  instance_title?: string
  title?: string
  template?: string
  initiator?: string
}

export interface Instance {
  id: string
  template: string
  version: number
  title?: string
  status: InstanceStatus
  initiator: string
  correlation_id?: string
  context: Record<string, unknown>
  created_at?: string
  ended_at?: string
  nodes?: NodeState[]
  tasks?: Task[]
}

export interface HistoryItem {
  at: string
  actor?: string
  action: string
  node_id?: string
  task_id?: string
  comment?: string
  data?: unknown
}

export interface Bookmark {
  id: string
  instance_id: string
  node_id: string
  node_instance_id?: string
  kind: string
  correlation_id?: string
  payload?: unknown
  created_at?: string
}

export interface PluginVersion {
  version: number
  runtime?: string
  sha256?: string
  size?: number
  timeout?: string
  created_at?: string
  uploaded_at?: string
  uploaded_by?: string
}

export interface Plugin {
  name: string
  version?: number
  latest_version?: number
  runtime?: string
  sha256?: string
  size?: number
  timeout?: string
  versions?: PluginVersion[]
}

export interface PluginRun {
  id: string
  plugin: string
  version: number
  instance_id?: string
  node_id?: string
  phase: string
  status: string
  exit_code?: number | null
  started_at?: string
  ended_at?: string
  duration_ms?: number
  stdout?: string
  stderr?: string
}

export interface ReturnTarget {
  node_id: string
  name?: string
}

export interface Me extends User {}

function items<T>(v: Page<T> | T[] | undefined | null): T[] {
  if (!v) return []
  return Array.isArray(v) ? v : v.items ?? []
}

/** listAll follows next_cursor until the list ends or `max` items were read. */
async function listAll<T>(path: string, query: Query = {}, max = 1000): Promise<T[]> {
  const out: T[] = []
  let cursor: string | undefined
  for (;;) {
    const page = await request<Page<T> | T[]>('GET', path, { query: { ...query, limit: 200, cursor } })
    out.push(...items(page))
    cursor = Array.isArray(page) ? undefined : page?.next_cursor ?? undefined
    if (!cursor || out.length >= max) return out
  }
}

export const api = {
  // Identity
  login: (username: string, password: string) =>
    request<{ token: string; user: User }>('POST', '/auth/login', { body: { username, password } }),
  me: () => request<Me>('GET', '/me'),
  users: () => listAll<User>('/users'),
  user: (username: string) => request<User>('GET', `/users/${encodeURIComponent(username)}`),
  createUser: (u: { username: string; password: string; display_name?: string; roles?: string[]; department?: string; manager?: string }) =>
    request<User>('POST', '/users', { body: u, idempotencyKey: newIdempotencyKey() }),
  departments: () => listAll<Department>('/departments'),
  createDepartment: (d: Department) => request<Department>('POST', '/departments', { body: d, idempotencyKey: newIdempotencyKey() }),

  // Templates
  templates: () => listAll<TemplateSummary>('/templates'),
  template: (key: string) => request<Template>('GET', `/templates/${encodeURIComponent(key)}`),
  createTemplate: (t: { key: string; name: string; description?: string; definition: Definition }) =>
    request<Template>('POST', '/templates', { body: t, idempotencyKey: newIdempotencyKey() }),
  saveDraft: (key: string, definition: Definition) =>
    request<Template & { validation?: ValidationResult }>('PUT', `/templates/${encodeURIComponent(key)}/draft`, { body: { definition } }),
  publish: (key: string) => request<{ key: string; version: number }>('POST', `/templates/${encodeURIComponent(key)}/publish`),
  validate: (definition: Definition, signal?: AbortSignal) =>
    request<ValidationResult>('POST', '/templates/validate', { body: { definition }, signal }),
  version: (key: string, n: number) => request<TemplateVersion>('GET', `/templates/${encodeURIComponent(key)}/versions/${n}`),
  versionDiagram: (key: string, n: number) =>
    request<string>('GET', `/templates/${encodeURIComponent(key)}/versions/${n}/diagram`, { text: true }),
  evaluateCondition: (condition: unknown, context: unknown) =>
    request<{ result: boolean }>('POST', '/conditions/evaluate', { body: { condition, context } }),

  // Instances
  startInstance: (b: { template: string; version?: number; context: Record<string, unknown>; correlation_id?: string; title?: string }) =>
    request<Instance>('POST', '/instances', { body: b, idempotencyKey: newIdempotencyKey() }),
  startLinear: (b: { title: string; steps: { name: string; approvers: Approvers; sign: SignMode }[]; context: Record<string, unknown> }) =>
    request<Instance>('POST', '/instances/linear', { body: b, idempotencyKey: newIdempotencyKey() }),
  instances: (q: { status?: string; template?: string; initiator?: string; correlation_id?: string; limit?: number; cursor?: string }) =>
    request<Page<Instance>>('GET', '/instances', { query: q }),
  instance: (id: string) => request<Instance>('GET', `/instances/${encodeURIComponent(id)}`),
  history: async (id: string) => items(await request<Page<HistoryItem>>('GET', `/instances/${encodeURIComponent(id)}/history`)),
  diagram: (id: string) => request<string>('GET', `/instances/${encodeURIComponent(id)}/diagram`, { text: true }),
  bookmarks: async (id: string) => items(await request<Page<Bookmark>>('GET', `/instances/${encodeURIComponent(id)}/bookmarks`)),
  terminate: (id: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/terminate`, { body: { reason } }),
  withdraw: (id: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/withdraw`, { body: { reason } }),
  jump: (id: string, to: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/jump`, { body: { to, reason } }),
  resumeBookmark: (id: string, data: unknown) => request<unknown>('POST', `/bookmarks/${encodeURIComponent(id)}/resume`, { body: { data } }),

  // Tasks
  tasks: (q: { assignee?: string; status?: string } = { assignee: 'me', status: 'pending' }) => listAll<Task>('/tasks', q),
  task: (id: string) => request<Task>('GET', `/tasks/${encodeURIComponent(id)}`),
  approve: (id: string, comment: string, data?: Record<string, unknown>) =>
    request<Task>('POST', `/tasks/${encodeURIComponent(id)}/approve`, { body: data && Object.keys(data).length ? { comment, data } : { comment } }),
  reject: (id: string, comment: string) => request<Task>('POST', `/tasks/${encodeURIComponent(id)}/reject`, { body: { comment } }),
  transfer: (id: string, to: string, comment: string) => request<Task>('POST', `/tasks/${encodeURIComponent(id)}/transfer`, { body: { to, comment } }),
  addSign: (id: string, users: string[], position: 'before' | 'after' | 'parallel', comment: string) =>
    request<unknown>('POST', `/tasks/${encodeURIComponent(id)}/add-sign`, { body: { users, position, comment } }),
  returnTo: (id: string, to: string, comment: string) => request<unknown>('POST', `/tasks/${encodeURIComponent(id)}/return`, { body: { to, comment } }),
  reclaim: (id: string, comment: string) => request<unknown>('POST', `/tasks/${encodeURIComponent(id)}/reclaim`, { body: { comment } }),
  returnTargets: async (id: string): Promise<ReturnTarget[]> => {
    const v = await request<unknown>('GET', `/tasks/${encodeURIComponent(id)}/return-targets`)
    const list = Array.isArray(v) ? v : v && typeof v === 'object' ? ((v as { items?: unknown[]; targets?: unknown[] }).items ?? (v as { targets?: unknown[] }).targets ?? []) : []
    return list
      .map((t) => (typeof t === 'string' ? { node_id: t } : (t as Record<string, unknown>)))
      .map((t) => ({ node_id: String(t.node_id ?? t.id ?? ''), name: (t.name ?? t.node_name) as string | undefined }))
      .filter((t) => t.node_id)
  },

  // Forms
  form: async (key: string): Promise<{ form?: FormSchema; raw: unknown }> => {
    const raw = await request<unknown>('GET', `/forms/${encodeURIComponent(key)}`)
    return { form: formOf(raw), raw }
  },
  submitForm: (key: string, values: Record<string, unknown>) =>
    request<Instance>('POST', `/forms/${encodeURIComponent(key)}/submit`, { body: values, idempotencyKey: newIdempotencyKey() }),

  // CC
  cc: () => request<Page<Instance & { read?: boolean; instance_id?: string }>>('GET', '/cc'),
  ccRead: (id: string) => request<unknown>('POST', `/cc/${encodeURIComponent(id)}/read`),

  // Plugins
  plugins: () => listAll<Plugin>('/plugins'),
  plugin: (name: string) => request<Plugin>('GET', `/plugins/${encodeURIComponent(name)}`),
  pluginRuns: async (name: string, q: { date?: string; instance_id?: string }) =>
    items(await request<Page<PluginRun>>('GET', `/plugins/${encodeURIComponent(name)}/runs`, { query: q })),
  /** the record of every attempt of a run, from the database (any replica shows it) */
  pluginRunLog: (id: string) => request<string>('GET', `/plugin-runs/${encodeURIComponent(id)}/log`, { text: true }),
  uploadPlugin: (f: { name: string; runtime: string; timeout: string; file: File }, onProgress?: (p: number) => void) => {
    const fd = new FormData()
    fd.set('name', f.name)
    fd.set('runtime', f.runtime)
    if (f.timeout) fd.set('timeout', f.timeout)
    fd.set('file', f.file, f.file.name)
    return upload<Plugin>('/plugins', fd, onProgress)
  },
}

/** draftDefinition reads the draft of GET /templates/{key}, which may be {definition} or the definition itself. */
export function draftDefinition(t: Template): Definition | undefined {
  const d = t.draft as unknown
  if (!d || typeof d !== 'object') return undefined
  if ('definition' in d) return (d as { definition: Definition }).definition ?? undefined
  if ('nodes' in d) return d as Definition
  return undefined
}

/** versionNumbers reads the version list of GET /templates/{key}, as numbers, newest first. */
export function versionNumbers(t: Template): VersionSummary[] {
  const list = (t.versions ?? []).map((v) => (typeof v === 'number' ? { version: v } : v))
  if (!list.length && t.latest_version) {
    for (let n = t.latest_version; n >= 1; n--) list.push({ version: n })
  }
  return list.sort((a, b) => b.version - a.version)
}
