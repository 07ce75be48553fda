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

export type Language = 'zh-CN' | 'en'

export interface User {
  username: string
  display_name?: string
  roles: string[]
  department?: string
  manager?: string
  tenant?: string
  created_at?: string
  disabled?: boolean
  password_change_required?: boolean
  language?: Language | ''
  email?: string
  mobile?: string
  im_id?: string
}

/** PUT /me: any subset of the signed-in user's profile. */
export interface ProfileUpdate {
  display_name?: string
  language?: Language | ''
  email?: string
  mobile?: string
  im_id?: string
}

/** PATCH /users/{username} (admins): any subset. */
export interface UserPatch {
  display_name?: string
  department?: string
  manager?: string
  roles?: string[]
  disabled?: boolean
  email?: string
  mobile?: string
  im_id?: string
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
  /** the published version's start trigger: manual, form, crontab, sync-api, async-api */
  start_kind?: string
  /** name and description per language (zh-CN, en), from the definition's i18n (labels.ts templateText) */
  i18n?: Partial<Record<Language, { name?: string; description?: string }>>
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
  /** the node's error message and code, when it failed */
  error?: string
  error_code?: string
}

export interface Task {
  id: string
  instance_id: string
  node_id: string
  node_name?: string
  assignee: string
  status: string
  /** approval, resubmit (the initiator's, after a return to start), sign_before, sign_after */
  kind?: string
  comment?: string
  created_at?: string
  decided_at?: string
  // Not in the contract's task shape; used when the server adds them to spare one request per task.
  instance_title?: string
  title?: string
  template?: string
  initiator?: string
  /** decided automatically (nobody to approve, self approval, dedupe); the history says why */
  auto?: boolean
  /** the user this task was meant for, who delegated it to the assignee (out of office) */
  delegated_from?: string
  /** when the initiator (or an admin) last urged the instance while this task was pending */
  urged_at?: string
}

/** Delegation: a user's new tasks go to another user within [starts_at, ends_at) (API.md "Delegation"). */
export interface Delegation {
  id: string
  from: string
  to: string
  starts_at: string
  ends_at: string
  templates: string[]
  reason?: string
  created_by?: string
  created_at?: string
}

/** NodeErrorInfo is an instance's `error`: the last unhandled node error (its code in words: i18n/words.ts errorText). */
export interface NodeErrorInfo {
  code: string
  node_id: string
  message: string
  data?: unknown
}

export interface Instance {
  id: string
  template: string
  version: number
  title?: string
  /** the title per language when the template's title pattern made it (labels.ts instanceTitle) */
  title_i18n?: Partial<Record<string, string>>
  status: InstanceStatus
  initiator: string
  correlation_id?: string
  context: Record<string, unknown>
  created_at?: string
  ended_at?: string
  nodes?: NodeState[]
  tasks?: Task[]
  /** the last unhandled node error (null when there was none) */
  error?: NodeErrorInfo | null
  /** set on a child instance: the subprocess node that started it */
  parent_instance_id?: string
  parent_node_id?: string
  /** the instances this instance's subprocess nodes started, as the parent recorded them */
  children?: ChildInstance[]
}

export interface ChildInstance {
  id: string
  template: string
  status: InstanceStatus
  node_id: string
  index: number
}

/** An instance that needs an admin (GET /instances?needs_attention=true). */
export interface AttentionItem extends Instance {
  reason: 'failed' | 'assignee_disabled' | 'assignee_deleted'
  /** the node error's code for a failed instance, else the reason */
  error_code: string
  attention_tasks: { task_id: string; node_id: string; node_name: string; assignee: string; reason: 'assignee_disabled' | 'assignee_deleted' }[]
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
  network?: 'on' | 'off'
  /** python runs forked from the warm runtime (default true); false spawns an interpreter per run */
  warm?: boolean
}

export interface Plugin {
  name: string
  version?: number
  latest_version?: number
  runtime?: string
  sha256?: string
  size?: number
  timeout?: string
  network?: 'on' | 'off'
  warm?: boolean
  versions?: PluginVersion[]
}

/** One protection of the plugin sandbox (GET /plugins/sandbox). */
export interface SandboxProtection {
  name: string
  in_force: boolean
  detail: string
}

/** What confines plugin runs on the replica that answered. */
export interface SandboxReport {
  plugins_run: boolean
  refused?: string
  uids: string
  gid: number
  work_dir: string
  python: string
  python_error?: string
  halley_uid: number
  protections: SandboxProtection[]
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
  /** why a failed or timed-out run failed, as Halley knows it (also when the process never started) */
  error?: string
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

/** An API token as GET /tokens lists it: never its value. */
export interface ApiToken {
  id: string
  name: string
  roles: string[]
  /** the admin whose authority it carries: it works while they are an enabled admin */
  owner: string
  created_by: string
  created_at: string
  expires_at: string | null
  last_used_at: string | null
}

/** POST /tokens' answer: the token's fields and, this once, its value. */
export interface CreatedToken extends ApiToken {
  token: string
}

/** One line of GET /audit. before/after are the target's state (secrets shown as "***"), null where none applies. */
export interface AuditEntry {
  id: number
  at: string
  actor: string
  actor_token?: string
  action: string
  target: string
  before: unknown
  after: unknown
  reason?: string
  ip?: string
  request_id?: string
}

export interface AuditQuery {
  actor?: string
  /** one action, or a prefix ending in '*' ("template.*") */
  action?: string
  /** RFC 3339; from inclusive, to exclusive */
  from?: string
  to?: string
  limit?: number
  cursor?: string
}

/** One line of GET /notifications: link is the web app's page (/tasks/{id}, /instances/{id}, /inbox). */
export interface AppNotification {
  id: string
  event: string
  instance_id: string
  task_id: string
  title: string
  node_name: string
  /** the notice in the user's language, written when it happened */
  message: string
  link: string
  at: string
  read: boolean
  read_at: string | null
}

export interface NotificationPage extends Page<AppNotification> {
  /** how many of all my notifications are unread (the badge) */
  unread: number
}

export type ChannelKind = 'smtp' | 'dingtalk' | 'feishu' | 'wecom' | 'webhook'

/** A notification channel as the API shows it: secrets as "***", robot and webhook URLs by host only. */
export interface Channel {
  name: string
  kind: ChannelKind
  config: Record<string, string | number>
  created_by: string
  created_at: string
}

export interface MessageTemplate {
  subject: string
  body: string
}

export interface NotificationSettings {
  language: '' | Language
  digest_hour: number | null
  timezone: string
  events: Record<string, string[]>
  templates: Record<string, Partial<Record<Language, MessageTemplate>>>
  updated_by?: string
  updated_at?: string
}

export interface NotificationDelivery {
  id: string
  channel: string
  kind: ChannelKind | ''
  recipient: string
  event: string
  instance_id: string
  task_id: string
  status: 'pending' | 'delivered' | 'failed' | 'skipped'
  attempts: number
  last_error: string
  next_attempt_at: string | null
  created_at: string
  last_attempt_at: string | null
  finished_at: string | null
}

export interface Me extends User {
  /** an API token, not a person: no profile, no password */
  token?: boolean
}

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
    request<{ token: string; user: User; password_change_required?: boolean }>('POST', '/auth/login', { body: { username, password } }),
  me: () => request<Me>('GET', '/me'),
  updateMe: (p: ProfileUpdate) => request<Me>('PUT', '/me', { body: p }),
  changePassword: (oldPassword: string, newPassword: string) =>
    request<void>('POST', '/me/password', { body: { old_password: oldPassword, new_password: newPassword } }),
  updateUser: (username: string, p: UserPatch) => request<User>('PATCH', `/users/${encodeURIComponent(username)}`, { body: p }),
  resetPassword: (username: string, newPassword: string) =>
    request<void>('POST', `/users/${encodeURIComponent(username)}/password`, { body: { new_password: newPassword } }),
  users: () => listAll<User>('/users'),
  user: (username: string) => request<User>('GET', `/users/${encodeURIComponent(username)}`),
  createUser: (u: {
    username: string
    password: string
    display_name?: string
    roles?: string[]
    department?: string
    manager?: string
    email?: string
    mobile?: string
    im_id?: string
  }) =>
    request<User>('POST', '/users', { body: u, idempotencyKey: newIdempotencyKey() }),
  deleteUser: (username: string) => request<void>('DELETE', `/users/${encodeURIComponent(username)}`),
  departments: () => listAll<Department>('/departments'),
  createDepartment: (d: Department) => request<Department>('POST', '/departments', { body: d, idempotencyKey: newIdempotencyKey() }),

  // API tokens (admins)
  tokens: () => listAll<ApiToken>('/tokens'),
  createToken: (b: { name: string; roles: string[]; expires_at?: string }) =>
    request<CreatedToken>('POST', '/tokens', { body: b, idempotencyKey: newIdempotencyKey() }),
  deleteToken: (id: string) => request<void>('DELETE', `/tokens/${encodeURIComponent(id)}`),

  // Audit log (admins)
  audit: (q: AuditQuery) => request<Page<AuditEntry>>('GET', '/audit', { query: { ...q } }),

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
  /** a version as Mermaid; with lang, drawn for a reader of that language (names, readable conditions, edge words) */
  versionDiagram: (key: string, n: number, lang?: Language) =>
    request<string>('GET', `/templates/${encodeURIComponent(key)}/versions/${n}/diagram`, { text: true, query: { lang } }),
  evaluateCondition: (condition: unknown, context: unknown) =>
    request<{ result: boolean }>('POST', '/conditions/evaluate', { body: { condition, context } }),

  // Instances
  startInstance: (b: {
    template: string
    version?: number
    context: Record<string, unknown>
    correlation_id?: string
    title?: string
    /** admins only: start a template whose trigger is not manual (recorded in its history) */
    override_trigger?: boolean
  }) =>
    request<Instance>('POST', '/instances', { body: b, idempotencyKey: newIdempotencyKey() }),
  startLinear: (b: { title: string; steps: { name: string; approvers: Approvers; sign: SignMode }[]; context: Record<string, unknown> }) =>
    request<Instance>('POST', '/instances/linear', { body: b, idempotencyKey: newIdempotencyKey() }),
  instances: (q: { status?: string; template?: string; initiator?: string; correlation_id?: string; limit?: number; cursor?: string }) =>
    request<Page<Instance>>('GET', '/instances', { query: q }),
  needsAttention: (q: { limit?: number; cursor?: string } = {}) => request<Page<AttentionItem>>('GET', '/instances', { query: { ...q, needs_attention: 'true' } }),
  instance: (id: string) => request<Instance>('GET', `/instances/${encodeURIComponent(id)}`),
  history: async (id: string) => items(await request<Page<HistoryItem>>('GET', `/instances/${encodeURIComponent(id)}/history`)),
  /** an instance as Mermaid with its states; with lang, drawn for a reader of that language */
  diagram: (id: string, lang?: Language) => request<string>('GET', `/instances/${encodeURIComponent(id)}/diagram`, { text: true, query: { lang } }),
  bookmarks: async (id: string) => items(await request<Page<Bookmark>>('GET', `/instances/${encodeURIComponent(id)}/bookmarks`)),
  terminate: (id: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/terminate`, { body: { reason } }),
  withdraw: (id: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/withdraw`, { body: { reason } }),
  jump: (id: string, to: string, reason: string) => request<Instance>('POST', `/instances/${encodeURIComponent(id)}/jump`, { body: { to, reason } }),
  urge: (id: string, comment: string) => request<{ tasks: number }>('POST', `/instances/${encodeURIComponent(id)}/urge`, { body: comment ? { comment } : {} }),
  delegations: async (user?: string) => items(await request<Page<Delegation>>('GET', '/delegations', { query: user ? { user } : {} })),
  createDelegation: (d: { to: string; starts_at: string; ends_at: string; templates?: string[]; from?: string; reason?: string }) =>
    request<Delegation>('POST', '/delegations', { body: d }),
  deleteDelegation: (id: string) => request<unknown>('DELETE', `/delegations/${encodeURIComponent(id)}`),
  resumeBookmark: (id: string, data: unknown) => request<unknown>('POST', `/bookmarks/${encodeURIComponent(id)}/resume`, { body: { data } }),

  // Tasks
  tasks: (q: { assignee?: string; status?: string } = { assignee: 'me', status: 'pending' }) => listAll<Task>('/tasks', q),
  task: (id: string) => request<Task>('GET', `/tasks/${encodeURIComponent(id)}`),
  approve: (id: string, comment: string, data?: Record<string, unknown>, attachments?: string[]) =>
    request<Task>('POST', `/tasks/${encodeURIComponent(id)}/approve`, {
      body: { comment, ...(data && Object.keys(data).length ? { data } : {}), ...(attachments?.length ? { attachments } : {}) },
    }),
  reject: (id: string, comment: string, attachments?: string[]) =>
    request<Task>('POST', `/tasks/${encodeURIComponent(id)}/reject`, { body: attachments?.length ? { comment, attachments } : { comment } }),
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

  // Notifications
  notifications: (q: { status?: 'unread'; limit?: number; cursor?: string } = {}) => request<NotificationPage>('GET', '/notifications', { query: q }),
  notificationRead: (id: string) => request<void>('POST', `/notifications/${encodeURIComponent(id)}/read`),
  notificationsReadAll: () => request<{ read: number }>('POST', '/notifications/read-all'),
  channels: () => listAll<Channel>('/channels'),
  createChannel: (c: { name: string; kind: ChannelKind; config: Record<string, unknown> }) =>
    request<Channel>('POST', '/channels', { body: c, idempotencyKey: newIdempotencyKey() }),
  deleteChannel: (name: string) => request<void>('DELETE', `/channels/${encodeURIComponent(name)}`),
  testChannel: (name: string, to?: string) => request<{ channel: string; delivered: boolean }>('POST', `/channels/${encodeURIComponent(name)}/test`, { body: to ? { to } : {} }),
  notificationSettings: () => request<NotificationSettings>('GET', '/notification-settings'),
  saveNotificationSettings: (s: NotificationSettings) => request<NotificationSettings>('PUT', '/notification-settings', { body: s }),
  notificationDeliveries: (q: { status?: string; limit?: number; cursor?: string }) =>
    request<Page<NotificationDelivery>>('GET', '/notification-deliveries', { query: q }),

  // Plugins
  plugins: () => listAll<Plugin>('/plugins'),
  plugin: (name: string) => request<Plugin>('GET', `/plugins/${encodeURIComponent(name)}`),
  pluginRuns: async (name: string, q: { date?: string; instance_id?: string }) =>
    items(await request<Page<PluginRun>>('GET', `/plugins/${encodeURIComponent(name)}/runs`, { query: q })),
  /** the record of every attempt of a run, from the database (any replica shows it) */
  pluginRunLog: (id: string) => request<string>('GET', `/plugin-runs/${encodeURIComponent(id)}/log`, { text: true }),
  pluginSandbox: () => request<SandboxReport>('GET', '/plugins/sandbox'),
  uploadPlugin: (f: { name: string; runtime: string; timeout: string; network?: 'on' | 'off'; warm?: boolean; file: File }, onProgress?: (p: number) => void) => {
    const fd = new FormData()
    fd.set('name', f.name)
    fd.set('runtime', f.runtime)
    if (f.timeout) fd.set('timeout', f.timeout)
    if (f.network) fd.set('network', f.network)
    if (f.warm !== undefined) fd.set('warm', f.warm ? 'true' : 'false')
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
