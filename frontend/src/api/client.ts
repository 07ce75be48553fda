// The HTTP client for /api/v1: bearer token, JSON in and out, and the API's error shape
// {"error":{"code","message","details"}} turned into an ApiError with a message a person can read.

export const API_BASE = '/api/v1'
const TOKEN_KEY = 'halley.token'

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly details: Record<string, unknown> | undefined

  constructor(status: number, code: string, message: string, details?: Record<string, unknown>) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.details = details
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'The request was not accepted',
  401: 'Please sign in again',
  403: 'You are not allowed to do this',
  404: 'Not found',
  409: 'This changed in the meantime',
  410: 'This was archived',
  413: 'The upload is too large',
  422: 'The server could not accept this',
  429: 'Too many requests: wait a moment and try again',
  500: 'The server had a problem',
  502: 'The Halley server cannot be reached',
  503: 'The Halley server is not ready',
  504: 'The Halley server took too long to answer',
}

/** errorFromBody builds an ApiError from a status and whatever body the server sent. */
export function errorFromBody(status: number, body: unknown): ApiError {
  if (body && typeof body === 'object' && 'error' in body) {
    const e = (body as { error: unknown }).error
    if (e && typeof e === 'object') {
      const o = e as { code?: unknown; message?: unknown; details?: unknown }
      const code = typeof o.code === 'string' ? o.code : `http_${status}`
      const message = typeof o.message === 'string' && o.message ? o.message : STATUS_TEXT[status] ?? `HTTP ${status}`
      const details = o.details && typeof o.details === 'object' ? (o.details as Record<string, unknown>) : undefined
      return new ApiError(status, code, message, details)
    }
    if (typeof e === 'string') return new ApiError(status, `http_${status}`, e)
  }
  return new ApiError(status, `http_${status}`, STATUS_TEXT[status] ?? `HTTP ${status}`)
}

/**
 * errorMessage is what the UI shows for any failure: the API's message, followed by the validation errors in its
 * details when there are some; network failures say that the server cannot be reached.
 */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) {
    const lines = [err.message]
    const errs = err.details?.errors
    if (Array.isArray(errs)) {
      for (const e of errs.slice(0, 8)) {
        if (e && typeof e === 'object') {
          const o = e as { message?: string; code?: string; nodes?: string[] }
          lines.push(`• ${o.message ?? o.code ?? ''}${o.nodes?.length ? ` [${o.nodes.join(', ')}]` : ''}`)
        }
      }
      if (errs.length > 8) lines.push(`• …and ${errs.length - 8} more`)
    }
    return lines.join('\n')
  }
  if (err instanceof TypeError) return 'The Halley server cannot be reached. Check your connection and try again.'
  if (err instanceof Error) return err.message
  return String(err)
}

export function getToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY)
  } catch {
    return null
  }
}

export function setToken(token: string | null): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token)
    else localStorage.removeItem(TOKEN_KEY)
  } catch {
    /* private mode: the session lasts as long as the page */
  }
}

let onUnauthorized: () => void = () => {}

/** setUnauthorizedHandler is called by the app to send the user to the login page when a token expires. */
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn
}

export type Query = Record<string, string | number | boolean | undefined | null>

export function buildUrl(path: string, query?: Query): string {
  const qs = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== '') qs.set(k, String(v))
  }
  const s = qs.toString()
  return `${API_BASE}${path}${s ? `?${s}` : ''}`
}

/** newIdempotencyKey makes a key for a create request, so a retried click creates nothing twice. */
export function newIdempotencyKey(): string {
  if (typeof crypto !== 'undefined' && typeof crypto.randomUUID === 'function') return crypto.randomUUID()
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`
}

export interface RequestOptions {
  query?: Query
  body?: unknown
  /** expect text/plain (diagrams) instead of JSON */
  text?: boolean
  idempotencyKey?: string
  signal?: AbortSignal
}

export async function request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: opts.text ? 'text/plain' : 'application/json' }
  const token = getToken()
  if (token) headers.Authorization = `Bearer ${token}`
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json'
  if (opts.idempotencyKey) headers['Idempotency-Key'] = opts.idempotencyKey
  const res = await fetch(buildUrl(path, opts.query), {
    method,
    headers,
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
    signal: opts.signal,
  })
  if (!res.ok) {
    let body: unknown
    try {
      body = await res.json()
    } catch {
      body = undefined
    }
    const err = errorFromBody(res.status, body)
    if (res.status === 401 && token && path !== '/auth/login') onUnauthorized()
    throw err
  }
  if (opts.text) return (await res.text()) as T
  if (res.status === 204) return undefined as T
  const text = await res.text()
  return (text ? JSON.parse(text) : undefined) as T
}

/**
 * upload sends multipart form data with progress reports (fetch cannot report upload progress, XMLHttpRequest can).
 */
export function upload<T>(path: string, form: FormData, onProgress?: (percent: number) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', buildUrl(path))
    const token = getToken()
    if (token) xhr.setRequestHeader('Authorization', `Bearer ${token}`)
    xhr.setRequestHeader('Accept', 'application/json')
    xhr.upload.onprogress = (ev) => {
      if (ev.lengthComputable && onProgress) onProgress(Math.round((ev.loaded / ev.total) * 100))
    }
    xhr.onerror = () => reject(new TypeError('network error'))
    xhr.onload = () => {
      let body: unknown
      try {
        body = xhr.responseText ? JSON.parse(xhr.responseText) : undefined
      } catch {
        body = undefined
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as T)
      else {
        if (xhr.status === 401 && token) onUnauthorized()
        reject(errorFromBody(xhr.status, body))
      }
    }
    xhr.send(form)
  })
}
