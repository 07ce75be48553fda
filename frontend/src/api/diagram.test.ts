// The diagram endpoints are asked for in a language with ?lang= (the server draws names and conditions in it);
// without one the request is the plain one every API client gets.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { api } from '@/api'

afterEach(() => vi.unstubAllGlobals())

function stubFetch() {
  const urls: string[] = []
  vi.stubGlobal('fetch', async (url: string) => {
    urls.push(url)
    return new Response('flowchart TD\n', { status: 200, headers: { 'Content-Type': 'text/plain; charset=utf-8' } })
  })
  return urls
}

describe('diagram requests', () => {
  it('pass the reader\'s language, and nothing without one', async () => {
    const urls = stubFetch()
    expect(await api.diagram('i 1', 'zh-CN')).toBe('flowchart TD\n')
    await api.diagram('i1')
    await api.versionDiagram('leave', 2, 'en')
    await api.versionDiagram('leave', 2)
    expect(urls).toEqual([
      '/api/v1/instances/i%201/diagram?lang=zh-CN',
      '/api/v1/instances/i1/diagram',
      '/api/v1/templates/leave/versions/2/diagram?lang=en',
      '/api/v1/templates/leave/versions/2/diagram',
    ])
  })
})
