// The password rules the server enforces (API.md: 422 weak_password under 8 characters), checked before sending
// so that the form says what is wrong at once; and the server's refusals as messages of the same form.
import { ApiError } from '@/api/client'

export const MIN_PASSWORD = 8

/** A message as an i18n key with its parameters. */
export interface Problem {
  key: string
  params?: Record<string, unknown>
}

/** checkNewPassword returns what is wrong with a password change, or null. Characters, not bytes, are counted. */
export function checkNewPassword(current: string, next: string, repeat: string): Problem | null {
  if ([...next].length < MIN_PASSWORD) return { key: 'password.tooShort', params: { n: MIN_PASSWORD } }
  if (next !== repeat) return { key: 'password.mismatch' }
  if (current && next === current) return { key: 'password.same' }
  return null
}

/** passwordProblem maps the server's refusal of POST /me/password onto a form message; null for other errors. */
export function passwordProblem(err: unknown): Problem | null {
  if (!(err instanceof ApiError)) return null
  switch (err.code) {
    case 'wrong_password':
      return { key: 'password.wrongCurrent' }
    case 'weak_password':
      return { key: 'password.tooShort', params: { n: MIN_PASSWORD } }
    case 'same_password':
      return { key: 'password.same' }
  }
  return null
}
