// The server's codes in the user's words: statuses, node error codes, history actions and actors. The server
// sends codes (API.md); what a person reads is chosen here, in the UI's language. A code this UI does not know
// yet (a newer server) is shown as it came.
import { language, t, te } from './index'
import { personName } from '@/stores/directory'

/** statusLabel names an instance, node, task or plugin-run status. */
export function statusLabel(status: string | undefined | null): string {
  if (!status) return t('status.unknown')
  return te(`status.${status}`, 'en') ? t(`status.${status}`) : status
}

/** errorText says in words what a node error code means (API.md "Node errors carry a code"). */
export function errorText(code: string): string {
  return /^[a-z_]+$/.test(code) && te(`nodeError.codes.${code}`, 'en') ? t(`nodeError.codes.${code}`) : t('nodeError.unknown', { code })
}

/** actionLabel names a history action ("task.approved", "node.error_caught"...). */
export function actionLabel(action: string): string {
  return /^[a-z_]+(\.[a-z_]+)+$/.test(action) && te(`history.action.${action}`, 'en') ? t(`history.action.${action}`) : action
}

/** actorLabel names who did something: a user as themselves, the engine and the synthetic initiators in words. */
export function actorLabel(actor: string | undefined | null): string {
  if (!actor || actor === 'system') return t('history.actor.system')
  if (actor === 'system:cron') return t('history.actor.cron')
  if (actor === 'system:anonymous') return t('history.actor.anonymous')
  const token = /^token:(.+)$/.exec(actor)
  if (token) return t('history.actor.token', { name: token[1] })
  const plugin = /^plugin:(.+)$/.exec(actor)
  if (plugin) return t('history.actor.plugin', { name: plugin[1] })
  return personName(actor)
}

/** triggerKindLabel names a start trigger kind in a few words ("form", "crontab"...). */
export function triggerKindLabel(kind: string | undefined): string {
  const k = kind || 'manual'
  return te(`triggerKind.${k}`, 'en') ? t(`triggerKind.${k}`) : k
}

// The history actions whose comment a person wrote (a decision, a move of theirs). Every other comment is the
// engine's own note, in English, about what happened (a plugin's exit, an error's message).
// i18n-ignore-start: history action codes, not message keys
const PERSON_COMMENTS = new Set([
  'task.approved',
  'task.rejected',
  'task.transferred',
  'task.add_sign',
  'task.returned',
  'task.reclaimed',
  'task.urged',
  'instance.terminated',
  'instance.withdrawn',
  'instance.jumped',
  'instance.resubmitted',
  'context.changed',
])
// i18n-ignore-end

/** HistoryNote is what a history item's comment becomes on the page. */
export interface HistoryNote {
  /** a person's words, shown as a quote */
  comment?: string
  /** the engine's note in the UI's language */
  note?: string
  /** the engine's own (English) words, shown with the item's data */
  detail?: string
}

function codeOf(data: unknown): string | undefined {
  if (!data || typeof data !== 'object') return undefined
  const d = data as { code?: unknown; error?: { code?: unknown } }
  const code = d.code ?? d.error?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * historyNote sorts a history item's comment: a person's words are theirs in any language; the engine's notes are
 * said through their error code where they carry one (errorText), and otherwise kept as detail in Chinese (in
 * English they read as they are).
 */
export function historyNote(h: { action: string; comment?: string; data?: unknown }): HistoryNote {
  if (!h.comment) return {}
  if (PERSON_COMMENTS.has(h.action)) return { comment: h.comment }
  if (language.value === 'en') return { note: h.comment }
  const code = codeOf(h.data)
  return code ? { note: errorText(code), detail: h.comment } : { detail: h.comment }
}

/** notificationEventLabel names a notified event ("task.created", "digest"...) in a few words. */
export function notificationEventLabel(event: string): string {
  const k = `notifyEvent.${event.replace('.', '_')}`
  return /^[a-z_.]+$/.test(event) && te(k, 'en') ? t(k) : event
}
