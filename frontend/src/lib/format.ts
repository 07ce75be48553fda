// Small presentation helpers: times, ages, statuses.

export function timeAgo(iso: string | undefined | null, now: Date = new Date()): string {
  if (!iso) return '—'
  const t = new Date(iso).getTime()
  if (Number.isNaN(t)) return '—'
  const s = Math.max(0, Math.round((now.getTime() - t) / 1000))
  if (s < 60) return 'just now'
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ago`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h} h ago`
  const d = Math.floor(h / 24)
  if (d < 30) return `${d} d ago`
  return new Date(t).toISOString().slice(0, 10)
}

export function formatTime(iso: string | undefined | null): string {
  if (!iso) return '—'
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return String(iso)
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

export function formatDuration(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '—'
  if (ms < 1000) return `${ms} ms`
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`
  const m = Math.floor(s / 60)
  return `${m} min ${Math.round(s - m * 60)} s`
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
