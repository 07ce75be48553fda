import { describe, expect, it } from 'vitest'
import { STATE_STYLES, decorateDiagram } from './diagram'

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
