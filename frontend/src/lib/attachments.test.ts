import { describe, expect, it } from 'vitest'
import { historyFiles, isImage } from './attachments'
import { fileEntries } from './files'

describe('attachments', () => {
  it('reads the files of a history entry', () => {
    const files = [{ id: 'att_0123456789abcdef0123456789abcdef', name: '交接.txt', size: 9, content_type: 'text/plain' }]
    expect(historyFiles({ assignee: 'bob', attachments: files })).toEqual(files)
    expect(fileEntries(historyFiles({ attachments: files }))).toEqual([{ id: files[0].id, name: '交接.txt', size: 9, type: 'text/plain' }])
    for (const none of [undefined, null, {}, { attachments: 'x' }, 'text']) expect(historyFiles(none)).toEqual([])
  })
  it('previews photos only, never SVG', () => {
    expect(['image/png', 'image/jpeg', 'image/webp'].every(isImage)).toBe(true)
    expect(['image/svg+xml', 'text/html', '', undefined].some(isImage)).toBe(false)
  })
})
