import { describe, expect, it } from 'vitest'
import { afterEach } from 'vitest'
import { setLanguage } from '@/i18n'
import { ApiError, buildUrl, errorFromBody, errorMessage } from './client'

afterEach(() => setLanguage('en', false))

describe('errorFromBody', () => {
  it('reads the API error shape', () => {
    const e = errorFromBody(409, { error: { code: 'task_already_decided', message: 'task 7 is approved', details: { status: 'approved' } } })
    expect(e).toBeInstanceOf(ApiError)
    expect([e.status, e.code, e.message]).toEqual([409, 'task_already_decided', 'task 7 is approved'])
    expect(e.details).toEqual({ status: 'approved' })
  })
  it('falls back to a readable text for bodies without the shape', () => {
    expect(errorMessage(errorFromBody(502, undefined))).toMatch(/cannot be reached/)
    expect(errorFromBody(418, 'teapot').message).toBe('HTTP 418')
    expect(errorMessage(errorFromBody(418, 'teapot'))).toBe('The server answered with error 418')
    expect(errorFromBody(400, { error: 'bad thing' }).message).toBe('bad thing')
    expect(errorMessage(errorFromBody(403, { error: { code: 'forbidden' } }))).toMatch(/not allowed/)
  })
})

describe('errorMessage', () => {
  it('lists validation errors from details under the message', () => {
    const e = new ApiError(422, 'invalid_definition', 'the draft is invalid', {
      errors: [
        { code: 'cycle', message: 'a → b → a', nodes: ['a', 'b'] },
        { code: 'no_end', message: 'no end node' },
      ],
    })
    expect(errorMessage(e)).toBe('the draft is invalid\n• a → b → a [a, b]\n• no end node')
  })
  it('says the server cannot be reached on network errors', () => {
    expect(errorMessage(new TypeError('Failed to fetch'))).toMatch(/cannot be reached/)
    setLanguage('zh-CN', false)
    expect(errorMessage(new TypeError('Failed to fetch'))).toBe('无法连接 Halley 服务器。请检查网络后重试。')
  })
  it('shows the server\'s English in English, and a known code in Chinese with the details it names', () => {
    const e = errorFromBody(422, { error: { code: 'field_not_editable', message: 'field amount is not editable at node lead', details: { field: 'amount' } } })
    expect(errorMessage(e)).toBe('field amount is not editable at node lead')
    setLanguage('zh-CN', false)
    expect(errorMessage(e)).toBe('您不能修改字段“amount”。')
    const decided = errorFromBody(409, { error: { code: 'task_already_decided', message: 'task 7 is approved', details: { status: 'approved' } } })
    expect(errorMessage(decided)).toBe('此任务已被处理（状态：approved）。')
  })
  it('says an unknown code in Chinese by its status, with the server\'s words after it', () => {
    setLanguage('zh-CN', false)
    expect(errorMessage(errorFromBody(409, { error: { code: 'brand_new', message: 'something specific' } }))).toBe('内容已被他人改动（something specific）')
    expect(errorMessage(errorFromBody(503, undefined))).toBe('Halley 服务器尚未就绪')
  })
  it('lists validation errors in Chinese by their codes', () => {
    setLanguage('zh-CN', false)
    const e = new ApiError(422, 'invalid_definition', 'the draft is invalid', { errors: [{ code: 'cycle', message: 'a → b → a', nodes: ['a', 'b'] }] })
    expect(errorMessage(e)).toBe('流程模板有需要修正的问题：\n• 这些节点形成了环路。 [a, b]')
  })
})

describe('buildUrl', () => {
  it('prefixes /api/v1 and leaves out empty query values', () => {
    expect(buildUrl('/instances', { status: 'running', template: '', initiator: undefined, limit: 50 })).toBe('/api/v1/instances?status=running&limit=50')
    expect(buildUrl('/me')).toBe('/api/v1/me')
  })
})
