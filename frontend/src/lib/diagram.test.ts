import { describe, expect, it } from 'vitest'
import { STATE_STYLES, decorateDiagram, localizeDiagram } from './diagram'

describe('decorateDiagram', () => {
  it('adds a classDef for every state the server did not style', () => {
    const src = 'flowchart TD\n  start --> lead\n  class start completed\n  classDef completed fill:#0f0\n'
    const out = decorateDiagram(src)
    expect(out).toContain('classDef completed fill:#0f0')
    expect(out.match(/classDef completed/g)).toHaveLength(1)
    for (const s of Object.keys(STATE_STYLES).filter((s) => s !== 'completed')) expect(out).toContain(`classDef ${s} `)
  })

  it('colours the nodes from the instance when the source has no state classes', () => {
    const src = 'flowchart TD\n  start([Apply]) --> lead[Lead]\n  lead --> done([End])'
    const out = decorateDiagram(src, [
      { node_id: 'start', state: 'completed' },
      { node_id: 'lead', state: 'active' },
      { node_id: 'ghost', state: 'completed' },
      { node_id: 'bad id', state: 'completed' },
      { node_id: 'done', state: 'weird' },
    ])
    expect(out).toContain('class start completed')
    expect(out).toContain('class lead active')
    expect(out).not.toContain('ghost')
    expect(out).not.toContain('bad id')
    expect(out).not.toContain('class done')
  })

  it('leaves the server classes alone when it sent some (::: or class)', () => {
    const out = decorateDiagram('flowchart TD\n  a:::completed --> b', [{ node_id: 'b', state: 'active' }])
    expect(out).not.toContain('class b active')
  })

  it('never assigns a class to a Mermaid keyword id', () => {
    const out = decorateDiagram('flowchart TD\n  start --> end', [{ node_id: 'end', state: 'completed' }])
    expect(out).not.toContain('class end')
  })

  it('returns non-flowchart sources unchanged', () => {
    expect(decorateDiagram('sequenceDiagram\n A->>B: hi')).toBe('sequenceDiagram\n A->>B: hi')
  })
})

describe('localizeDiagram', () => {
  const words = { default: '默认', onTimeout: '超时时', timeout: '超时', onError: '出错时', pruned: '未选中', killed: '已中止' }
  // The labels service/graph/mermaid.go writes (see its tests): conditions, default, states, timeout and catch branches.
  const src = [
    'flowchart TD',
    '    n0(["Apply"])',
    '    n0 -->|"days >= 3"| n1',
    '    n0 -->|"default · pruned"| n2',
    '    n1 -->|"days >= 3 · killed"| n2',
    '    n1 -->|"pruned"| n3',
    '    n1 -.->|"on timeout"| n3',
    '    n2 -.->|"timeout"| n3',
    '    n2 -.->|"on error"| n3',
    '    n2 -->|"default"| n3',
    '    n3 -->|"status = pruned"| n4',
    '    n3 --> n4',
  ].join('\n')

  it('puts the UI\'s words on the server\'s labels, and leaves conditions alone', () => {
    const out = localizeDiagram(src, words).split('\n')
    expect(out[2]).toBe('    n0 -->|"days >= 3"| n1')
    expect(out[3]).toBe('    n0 -->|"默认 · 未选中"| n2')
    expect(out[4]).toBe('    n1 -->|"days >= 3 · 已中止"| n2')
    expect(out[5]).toBe('    n1 -->|"未选中"| n3')
    expect(out[6]).toBe('    n1 -.->|"超时时"| n3')
    expect(out[7]).toBe('    n2 -.->|"超时"| n3')
    expect(out[8]).toBe('    n2 -.->|"出错时"| n3')
    expect(out[9]).toBe('    n2 -->|"默认"| n3')
    expect(out[10]).toBe('    n3 -->|"status = pruned"| n4')
    expect(out[11]).toBe('    n3 --> n4')
    expect(out[1]).toBe('    n0(["Apply"])')
  })

  it('escapes the words for Mermaid', () => {
    const out = localizeDiagram('flowchart TD\n    a -->|"default"| b', { ...words, default: 'a "b" | <c>' })
    expect(out).toBe('flowchart TD\n    a -->|"a #34;b#34; #124; #60;c#62;"| b')
  })
})
