// Values that come from an instance's context are data, never links: whoever started the instance wrote them (an
// anonymous form submitter included). A value is put into an href or src only through the helpers here: files are
// offered as downloads of their bytes, and only http(s) URLs are ever linked. docs/security.md says why.
import { t } from '@/i18n'

/** One file of a file field, as the form renderer shows it. */
export interface FileEntry {
  name: string
  size?: number
  type?: string
  /** a base64 data: URL (the file's bytes); anything else is dropped */
  dataUrl?: string
  /** an uploaded attachment's id */
  id?: string
}

const BASE64_DATA_URL = /^data:([a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+)?((?:;[a-z0-9_.-]+=[a-z0-9_.+-]+)*);base64,([a-z0-9+/]*={0,2})$/i
const ATTACHMENT_ID = /^[A-Za-z0-9_-]{1,128}$/

/** base64DataUrl returns s when it is a base64 data: URL, else undefined (javascript:, http:, plain data: URLs). */
export function base64DataUrl(s: unknown): string | undefined {
  return typeof s === 'string' && BASE64_DATA_URL.test(s) ? s : undefined
}

/** fileEntries reads a file field's value: a list of inline files or attachment ids. Malformed entries are named
 * but carry nothing that could be opened. */
export function fileEntries(v: unknown): FileEntry[] {
  if (!Array.isArray(v)) return []
  return v.map((x, i): FileEntry => {
    if (typeof x === 'string') return ATTACHMENT_ID.test(x) ? { name: x, id: x } : { name: t('form.fileN', { n: i + 1 }) }
    if (!x || typeof x !== 'object') return { name: t('form.fileN', { n: i + 1 }) }
    const o = x as Record<string, unknown>
    const e: FileEntry = { name: typeof o.name === 'string' && o.name ? o.name : t('form.fileN', { n: i + 1 }) }
    if (typeof o.size === 'number' && o.size >= 0) e.size = o.size
    if (typeof o.type === 'string') e.type = o.type
    else if (typeof o.content_type === 'string') e.type = o.content_type
    const d = base64DataUrl(o.data_url)
    if (d) e.dataUrl = d
    if (typeof o.id === 'string' && ATTACHMENT_ID.test(o.id)) e.id = o.id
    return e
  })
}

/** dataUrlBlob decodes a base64 data: URL into a Blob typed application/octet-stream: the browser saves it, it never
 * renders it (an HTML or SVG file stays a file). */
export function dataUrlBlob(url: string): Blob {
  const data = base64DataUrl(url)
  if (!data) throw new Error('not a base64 data: URL') // i18n-ignore: callers check first
  const bin = atob(data.slice(data.indexOf(',') + 1))
  const bytes = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i)
  return new Blob([bytes], { type: 'application/octet-stream' })
}

/** downloadFile saves an inline file under its name. */
export function downloadFile(f: FileEntry): void {
  if (!f.dataUrl) return
  const a = document.createElement('a')
  a.href = URL.createObjectURL(dataUrlBlob(f.dataUrl))
  // eslint-disable-next-line no-control-regex -- control characters are what the file name must lose
  a.download = f.name.replace(/[\\/:*?"<>|\x00-\x1f]/g, '_') || 'file'
  a.rel = 'noopener'
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
}

/** safeHttpUrl returns s when it is an absolute http(s) URL (scheme written out), else undefined: the only kind of
 * context value that may be linked. */
export function safeHttpUrl(s: unknown): string | undefined {
  if (typeof s !== 'string' || !/^https?:\/\//i.test(s.trim())) return undefined
  try {
    const u = new URL(s.trim())
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.href
  } catch {
    /* not a URL */
  }
  return undefined
}
