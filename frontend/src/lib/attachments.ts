// Uploaded attachments (API.md "Attachments"): files go to POST /attachments (or, for a start form that may be filled
// anonymously, POST /forms/{key}/attachments) and a field keeps their ids with name, size and type. Reading one needs
// the bearer token, so the bytes are fetched and shown or saved from a blob: URL, never linked by their address; the
// server serves risky types as downloads anyway (docs/security.md).
import { API_BASE, errorFromBody, getToken, request, upload } from '@/api/client'

/** An uploaded file as POST /attachments answers and a file field keeps it. */
export interface UploadedFile {
  id: string
  name: string
  size: number
  content_type: string
  sha256?: string
}

/** The server's default limit (HALLEY_ATTACHMENT_MAX_SIZE), used until it has said its own. */
export const DEFAULT_MAX_BYTES = 20 * 1024 * 1024

let limit: Promise<number> | undefined

/** maxAttachmentBytes asks the server its upload limit once (GET /attachments); formLimit (GET /forms/{key}'s
 * attachment_max_size) answers for an anonymous submitter. */
export function maxAttachmentBytes(formLimit?: number): Promise<number> {
  if (formLimit && formLimit > 0) return Promise.resolve(formLimit)
  if (!getToken()) return Promise.resolve(DEFAULT_MAX_BYTES)
  limit ??= request<{ max_size?: number }>('GET', '/attachments')
    .then((r) => (r?.max_size && r.max_size > 0 ? r.max_size : DEFAULT_MAX_BYTES))
    .catch(() => {
      limit = undefined
      return DEFAULT_MAX_BYTES
    })
  return limit
}

/** uploadAttachment sends one file, reporting progress in percent. */
export function uploadAttachment(file: File, opts: { formKey?: string; onProgress?: (p: number) => void } = {}): Promise<UploadedFile> {
  const form = new FormData()
  form.append('file', file, file.name)
  const path = opts.formKey && !getToken() ? `/forms/${encodeURIComponent(opts.formKey)}/attachments` : '/attachments'
  return upload<UploadedFile>(path, form, opts.onProgress)
}

const blobs = new Map<string, Promise<Blob>>()

/** attachmentBlob fetches an attachment's bytes (once per page load). */
export function attachmentBlob(id: string): Promise<Blob> {
  let p = blobs.get(id)
  if (!p) {
    const token = getToken()
    p = fetch(`${API_BASE}/attachments/${encodeURIComponent(id)}`, { headers: token ? { Authorization: `Bearer ${token}` } : {} }).then(async (res) => {
      if (!res.ok) {
        let body: unknown
        try {
          body = await res.json()
        } catch {
          body = undefined
        }
        throw errorFromBody(res.status, body)
      }
      return res.blob()
    })
    p.catch(() => blobs.delete(id)) // a failure is not remembered: the next look tries again
    blobs.set(id, p)
  }
  return p
}

/** isImage reports a type shown as a picture (the server serves these inline; SVG is not one). */
export function isImage(type: string | undefined): boolean {
  return !!type && /^image\/(png|jpeg|gif|webp|bmp)$/.test(type)
}

/** saveAttachment downloads an attachment under its name, as application/octet-stream: the browser never renders it. */
export async function saveAttachment(id: string, name: string): Promise<void> {
  const blob = await attachmentBlob(id)
  const a = document.createElement('a')
  a.href = URL.createObjectURL(new Blob([blob], { type: 'application/octet-stream' }))
  // eslint-disable-next-line no-control-regex -- control characters are what the file name must lose
  a.download = name.replace(/[\\/:*?"<>|\x00-\x1f]/g, '_') || 'file'
  a.rel = 'noopener'
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
}

/** historyFiles are the files that went with a history entry's comment (data.attachments of an approval or a
 * rejection). */
export function historyFiles(data: unknown): unknown[] {
  const list = data && typeof data === 'object' ? (data as { attachments?: unknown }).attachments : undefined
  return Array.isArray(list) ? list : []
}
