import { describe, expect, it } from 'vitest'
import { ApiError, buildUrl, errorFromBody, errorMessage } from './client'

describe('errorFromBody', () => {
  it('reads the API error shape', () => {
    const e = errorFromBody(409, { error: { code: 'task_already_decided', message: 'task 7 is approved', details: { status: 'approved' } } })
    expect(e).toBeInstanceOf(ApiError)
    expect([e.status, e.code, e.message]).toEqual([409, 'task_already_decided', 'task 7 is approved'])
    expect(e.details).toEqual({ status: 'approved' })
  })
  it('falls back to a readable text for bodies without the shape', () => {
    expect(errorFromBody(502, undefined).message).toMatch(/cannot be reached/)
    expect(errorFromBody(418, 'teapot').message).toBe('HTTP 418')
    expect(errorFromBody(400, { error: 'bad thing' }).message).toBe('bad thing')
    expect(errorFromBody(403, { error: { code: 'forbidden' } }).message).toMatch(/not allowed/)
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
  })
})

describe('buildUrl', () => {
  it('prefixes /api/v1 and leaves out empty query values', () => {
    expect(buildUrl('/instances', { status: 'running', template: '', initiator: undefined, limit: 50 })).toBe('/api/v1/instances?status=running&limit=50')
    expect(buildUrl('/me')).toBe('/api/v1/me')
  })
})
