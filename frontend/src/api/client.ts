// The HTTP client for /api/v1: bearer token, JSON in and out, and the API's error shape
// {"error":{"code","message","details"}} turned into an ApiError, which errorMessage says in the UI's language.
import { language, t, te } from '@/i18n'

export const API_BASE = '/api/v1'
const TOKEN_KEY = 'halley.token'

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly details: Record<string, unknown> | undefined
  /** the API's own message (English, specific), '' when the answer had none */
  readonly serverMessage: string

  constructor(status: number, code: string, message: string, details?: Record<string, unknown>) {
    super(message || `HTTP ${status}`) // i18n-ignore: errorMessage says it
    this.name = 'ApiError' // i18n-ignore: a class name
    this.status = status
    this.code = code
    this.details = details
    this.serverMessage = message
  }
}

/** errorFromBody builds an ApiError from a status and whatever body the server sent. */
export function errorFromBody(status: number, body: unknown): ApiError {
  if (body && typeof body === 'object' && 'error' in body) {
    const e = (body as { error: unknown }).error
    if (e && typeof e === 'object') {
      const o = e as { code?: unknown; message?: unknown; details?: unknown }
      const code = typeof o.code === 'string' ? o.code : `http_${status}`
      const message = typeof o.message === 'string' ? o.message : ''
      const details = o.details && typeof o.details === 'object' ? (o.details as Record<string, unknown>) : undefined
      return new ApiError(status, code, message, details)
    }
    if (typeof e === 'string') return new ApiError(status, `http_${status}`, e)
  }
  return new ApiError(status, `http_${status}`, '')
}

function statusText(status: number): string {
  return te(`http.s${status}`, 'en') ? t(`http.s${status}`) : t('http.other', { status })
}

/** params are the error's details that a message may name ({field}, {status}...), as text. */
function params(details: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(details ?? {})) if (typeof v === 'string' || typeof v === 'number') out[k] = String(v)
  return out
}

/**
 * apiErrorText says an API error in the UI's language. The server's message is English and specific (it names the
 * field, the node, the status): in English it is shown as it came; in Chinese a known code is said in Chinese (with
 * the details it names), an unknown one by its HTTP status with the server's words after it.
 */
export function apiErrorText(err: ApiError): string {
  const known = /^[a-z_]+$/.test(err.code) && te(`apiError.${err.code}`, 'en')
  if (language.value === 'en' && err.serverMessage) return err.serverMessage
  if (known) return t(`apiError.${err.code}`, params(err.details))
  return err.serverMessage ? t('http.withMessage', { text: statusText(err.status), message: err.serverMessage }) : statusText(err.status)
}

/** validationText says one template validation problem ({"code","message","nodes"}) in the UI's language. */
export function validationText(e: { code?: string; message?: string }): string {
  const code = e.code ?? ''
  if (language.value === 'en' && e.message) return e.message
  if (/^[a-z_]+$/.test(code) && te(`validation.${code}`, 'en')) return t(`validation.${code}`)
  return e.message || code
}

/**
 * errorMessage is what the UI shows for any failure: the API's error in the UI's language, followed by the
 * validation errors in its details when there are some; network failures say that the server cannot be reached.
 */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) {
    const lines = [apiErrorText(err)]
    const errs = err.details?.errors
    if (Array.isArray(errs)) {
      for (const e of errs.slice(0, 8)) {
        if (e && typeof e === 'object') {
          const o = e as { message?: string; code?: string; nodes?: string[] }
          lines.push(`• ${validationText(o)}${o.nodes?.length ? ` [${o.nodes.join(', ')}]` : ''}`)
        }
      }
      if (errs.length > 8) lines.push(`• ${t('http.more', { n: errs.length - 8 })}`)
    }
    return lines.join('\n')
  }
  if (err instanceof TypeError) return t('http.network')
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
    // i18n-ignore-start: header names
    if (token) xhr.setRequestHeader('Authorization', `Bearer ${token}`)
    xhr.setRequestHeader('Accept', 'application/json')
    // i18n-ignore-end
    xhr.upload.onprogress = (ev) => {
      if (ev.lengthComputable && onProgress) onProgress(Math.round((ev.loaded / ev.total) * 100))
    }
    xhr.onerror = () => reject(new TypeError('network error')) // i18n-ignore: errorMessage says it
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
