import { describe, expect, it } from 'vitest'
import { ApiError } from '@/api/client'
import { checkNewPassword, passwordProblem } from './password'

describe('checkNewPassword', () => {
  it.each([
    ['old-password', '1234567', '1234567', 'password.tooShort'],
    ['old-password', '七个字符的密码', '七个字符的密码', 'password.tooShort'],
    ['old-password', 'eight-ch', 'eight-cx', 'password.mismatch'],
    ['same-password', 'same-password', 'same-password', 'password.same'],
    ['old-password', '八个字符的新密码', '八个字符的新密码', null],
    ['', 'a-new-password', 'a-new-password', null],
  ])('%s → %s / %s', (cur, next, repeat, want) => {
    expect(checkNewPassword(cur, next, repeat)?.key ?? null).toBe(want)
  })
})

describe('passwordProblem', () => {
  it('maps the server codes', () => {
    expect(passwordProblem(new ApiError(403, 'wrong_password', 'x'))?.key).toBe('password.wrongCurrent')
    expect(passwordProblem(new ApiError(422, 'weak_password', 'x'))?.key).toBe('password.tooShort')
    expect(passwordProblem(new ApiError(422, 'same_password', 'x'))?.key).toBe('password.same')
    expect(passwordProblem(new ApiError(500, 'internal', 'x'))).toBeNull()
    expect(passwordProblem(new Error('x'))).toBeNull()
  })
})
