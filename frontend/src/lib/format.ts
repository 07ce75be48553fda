// Small presentation helpers: times, ages, durations and sizes in the UI's language, status colours.
import { language, t } from '@/i18n'
import type { Language } from '@/i18n/lang'

const dateTimeFormats = new Map<string, Intl.DateTimeFormat>()

function dateTimeFormat(lang: Language, kind: 'time' | 'date', timeZone?: string): Intl.DateTimeFormat {
  const key = `${lang}|${kind}|${timeZone ?? ''}`
  let f = dateTimeFormats.get(key)
  if (!f) {
    // Month as a word (en "Jan 10, 2025", zh-CN "2025年1月10日"): never ambiguous, whichever order a reader is used to.
    const date: Intl.DateTimeFormatOptions = { year: 'numeric', month: 'short', day: 'numeric', timeZone }
    f = new Intl.DateTimeFormat(lang, kind === 'date' ? date : { ...date, hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
    dateTimeFormats.set(key, f)
  }
  return f
}

/** timeAgo says how long ago a moment was ("15 minutes ago", "15分钟前"); a month and more shows the date. */
export function timeAgo(iso: string | undefined | null, now: Date = new Date(), lang: Language = language.value): string {
  if (!iso) return '—'
  const time = new Date(iso).getTime()
  if (Number.isNaN(time)) return '—'
  const s = Math.max(0, Math.round((now.getTime() - time) / 1000))
  if (s < 60) return t('time.justNow', {}, { locale: lang })
  const rel = new Intl.RelativeTimeFormat(lang, { numeric: 'always', style: 'long' })
  const m = Math.floor(s / 60)
  if (m < 60) return rel.format(-m, 'minute')
  const h = Math.floor(m / 60)
  if (h < 24) return rel.format(-h, 'hour')
  const d = Math.floor(h / 24)
  if (d < 30) return rel.format(-d, 'day')
  return dateTimeFormat(lang, 'date').format(time)
}

/** formatTime is a moment with its date and time to the second, in the browser's time zone. */
export function formatTime(iso: string | undefined | null, lang: Language = language.value, timeZone?: string): string {
  if (!iso) return '—'
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return String(iso)
  return dateTimeFormat(lang, 'time', timeZone).format(d)
}

/** formatDuration is a plugin run's duration: milliseconds, seconds, or minutes and seconds. */
export function formatDuration(ms: number | undefined | null, lang: Language = language.value): string {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '—'
  const o = { locale: lang }
  if (ms < 1000) return t('time.ms', { n: ms }, o)
  const s = ms / 1000
  if (s < 60) return t('time.s', { n: s.toFixed(s < 10 ? 2 : 1) }, o)
  const m = Math.floor(s / 60)
  return t('time.minS', { m, s: Math.round(s - m * 60) }, o)
}

export function formatBytes(n: number | undefined | null): string {
  if (n === undefined || n === null) return '—'
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

type TagType = 'primary' | 'success' | 'info' | 'warning' | 'danger'

/** statusTag maps instance, node, task and plugin-run statuses to a tag colour. */
export function statusTag(status: string | undefined): TagType {
  switch (status) {
    case 'completed':
    case 'approved':
    case 'succeeded':
      return 'success'
    case 'running':
    case 'active':
    case 'pending':
      return 'primary'
    case 'waiting':
    case 'queued':
    case 'transferred':
    case 'withdrawn':
      return 'warning'
    case 'rejected':
    case 'failed':
    case 'terminated':
    case 'timed_out':
      return 'danger'
    default:
      return 'info'
  }
}

export const INSTANCE_STATUSES = ['running', 'completed', 'rejected', 'terminated', 'failed', 'withdrawn'] as const

export function today(now: Date = new Date()): string {
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`
}
