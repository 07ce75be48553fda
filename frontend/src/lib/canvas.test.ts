import { describe, expect, it } from 'vitest'
import { LAYOUT, autoLayout, canConnect, canvasToDefinition, conditionLabel, definitionToCanvas } from './canvas'
import { cleanDefinition, type Definition } from './definition'

// The example of API.md "Definition".
const apiExample = (): Definition => ({
  nodes: [
    { id: 'start', type: 'start', name: 'Apply', trigger: { kind: 'manual' } },
    { id: 'lead', type: 'approval', name: 'Team lead', approvers: { users: ['bob'] }, sign: 'or' },
    { id: 'dba', type: 'approval', name: 'DBA', approvers: { roles: ['dba'] }, sign: 'all' },
    { id: 'grant', type: 'auto', name: 'Grant', join: 'and', plugins: { pre: [], after: ['grant-table'] } },
    { id: 'end', type: 'end' },
  ],
  edges: [
    { from: 'start', to: 'lead' },
    { from: 'start', to: 'dba', condition: { level: { $gte: 3 } } },
    { from: 'lead', to: 'grant' },
    { from: 'dba', to: 'grant' },
    { from: 'grant', to: 'end' },
  ],
})

describe('definitionToCanvas / canvasToDefinition', () => {
  it('round-trips the API example: same nodes, edges, conditions', () => {
    const def = apiExample()
    const g = definitionToCanvas(def)
    expect(g.nodes.map((n) => n.id)).toEqual(['start', 'lead', 'dba', 'grant', 'end'])
    expect(g.edges.map((e) => [e.source, e.target])).toEqual(def.edges.map((e) => [e.from, e.to]))
    expect(g.dropped).toEqual([])
    const back = canvasToDefinition(g.nodes, g.edges)
    expect(cleanDefinition(back)).toEqual(cleanDefinition(def))
    expect(back.edges[1].condition).toEqual({ level: { $gte: 3 } })
  })

  it('keeps positions from layout and writes moved positions back, rounded', () => {
    const def = { ...apiExample(), layout: { start: { x: 10, y: 20 }, lead: { x: 0, y: 200 }, dba: { x: 300, y: 200 }, grant: { x: 150, y: 400 }, end: { x: 150, y: 600 } } }
    const g = definitionToCanvas(def)
    expect(g.nodes[0].position).toEqual({ x: 10, y: 20 })
    g.nodes[1].position = { x: 33.6, y: 250.2 }
    const back = canvasToDefinition(g.nodes, g.edges)
    expect(back.layout?.lead).toEqual({ x: 34, y: 250 })
    expect(back.layout?.start).toEqual({ x: 10, y: 20 })
  })

  it('reads positions saved under meta.layout', () => {
    const def: Definition = { ...apiExample(), meta: { layout: { start: { x: 7, y: 8 }, lead: { x: 0, y: 0 }, dba: { x: 0, y: 0 }, grant: { x: 0, y: 0 }, end: { x: 0, y: 0 } } } }
    expect(definitionToCanvas(def).nodes[0].position).toEqual({ x: 7, y: 8 })
  })

  it('lays out a definition without positions', () => {
    const g = definitionToCanvas(apiExample())
    const y = Object.fromEntries(g.nodes.map((n) => [n.id, n.position.y]))
    expect(y.start).toBeLessThan(y.lead)
    expect(y.lead).toBe(y.dba)
    expect(y.grant).toBeGreaterThan(y.dba)
    expect(y.end).toBeGreaterThan(y.grant)
  })

  it('does not share objects with the definition (editing the canvas leaves the source alone)', () => {
    const def = apiExample()
    const g = definitionToCanvas(def)
    g.nodes[1].data.node.approvers!.users!.push('carol')
    g.edges[1].data.edge.condition = {}
    expect(def.nodes[1].approvers?.users).toEqual(['bob'])
    expect(def.edges[1].condition).toEqual({ level: { $gte: 3 } })
  })

  it('sets aside edges that name a missing node', () => {
    const def = apiExample()
    def.edges.push({ from: 'grant', to: 'ghost' })
    const g = definitionToCanvas(def)
    expect(g.edges).toHaveLength(5)
    expect(g.dropped).toEqual([{ from: 'grant', to: 'ghost' }])
  })

  it('takes node ids from the canvas and edge ends from source/target (after a rename or reconnect)', () => {
    const g = definitionToCanvas(apiExample())
    g.nodes[4].id = 'done'
    g.edges[4].target = 'done'
    const back = canvasToDefinition(g.nodes, g.edges)
    expect(back.nodes[4].id).toBe('done')
    expect(back.edges[4]).toEqual({ from: 'grant', to: 'done' })
  })

  it('keeps explicit edge ids and default flags; generated canvas ids do not leak into the definition', () => {
    const def: Definition = {
      nodes: [
        { id: 's', type: 'start' },
        { id: 'a', type: 'end' },
        { id: 'b', type: 'end' },
      ],
      edges: [
        { id: 'to-a', from: 's', to: 'a', condition: { x: 1 } },
        { from: 's', to: 'b', default: true },
      ],
    }
    const g = definitionToCanvas(def)
    expect(g.edges[0].id).toBe('to-a')
    expect(g.edges[1].id).not.toBe('')
    const back = cleanDefinition(canvasToDefinition(g.nodes, g.edges))
    expect(back.edges).toEqual([
      { id: 'to-a', from: 's', to: 'a', condition: { x: 1 } },
      { from: 's', to: 'b', default: true },
    ])
  })

  it('gives two parallel edges between the same nodes distinct canvas ids', () => {
    const def: Definition = {
      nodes: [
        { id: 's', type: 'start' },
        { id: 'e', type: 'end' },
      ],
      edges: [
        { from: 's', to: 'e', condition: { a: 1 } },
        { from: 's', to: 'e', default: true },
      ],
    }
    const ids = definitionToCanvas(def).edges.map((e) => e.id)
    expect(new Set(ids).size).toBe(2)
  })
})

describe('autoLayout of what the business designer can show', () => {
  // leave: lead → manager when more than 3 days, else (default) straight to the end
  const leave = (): Definition => ({
    nodes: [
      { id: 'start', type: 'start', trigger: { kind: 'manual' } },
      { id: 'lead', type: 'approval', approvers: { users: ['bob'] } },
      { id: 'manager', type: 'approval', approvers: { users: ['carol'] } },
      { id: 'end', type: 'end' },
      { id: 'pay', type: 'callback', timeout: '1h', timeout_branch: 'chase' },
      { id: 'chase', type: 'approval', approvers: { users: ['dan'] } },
      { id: 'end2', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'lead' },
      { from: 'lead', to: 'manager', condition: { days: { $gt: 3 } } },
      { from: 'lead', to: 'pay', default: true },
      { from: 'manager', to: 'pay' },
      { from: 'pay', to: 'end' },
      { from: 'chase', to: 'end2' },
    ],
  })
  it('puts the branches side by side and the default branch in a column of its own, never under a node', () => {
    const pos = autoLayout(leave())
    expect(pos.manager.y).toBeGreaterThan(pos.lead.y)
    expect(pos.pay.y).toBeGreaterThan(pos.manager.y)
    // the split and the join are centred over the two columns; the manager is in the left one
    expect(pos.lead.x).toBe(pos.pay.x)
    expect(pos.manager.x).toBe(pos.lead.x - LAYOUT.colGap / 2)
    // the straight line lead → pay (the default branch) passes no node: none sits at the split's x between them
    for (const [id, p] of Object.entries(pos)) {
      if (id === 'lead' || id === 'pay') continue
      const between = p.y > pos.lead.y && p.y < pos.pay.y
      const centre = pos.lead.x + 90 // nodes are 180 wide
      expect(between && p.x <= centre && centre <= p.x + 180, id).toBe(false)
    }
  })
  it('puts the timeout branch to the right and draws an arrow to it', () => {
    const def = leave()
    const pos = autoLayout(def)
    expect(pos.chase.x).toBeGreaterThan(pos.manager.x + 180)
    const g = definitionToCanvas(def)
    const arrow = g.edges.find((e) => e.source === 'pay' && e.target === 'chase')!
    expect(arrow.data.virtual).toBe(true)
    // the arrow is drawn, not saved
    expect(canvasToDefinition(g.nodes, g.edges).edges).toEqual(def.edges)
  })
})

describe('autoLayout', () => {
  it('puts each node one layer below its deepest predecessor and centres layers', () => {
    const pos = autoLayout(apiExample())
    expect(pos.start.y).toBe(LAYOUT.originY)
    expect(pos.lead.y).toBe(LAYOUT.originY + LAYOUT.rowGap)
    expect(pos.grant.y).toBe(LAYOUT.originY + 2 * LAYOUT.rowGap)
    expect(pos.end.y).toBe(LAYOUT.originY + 3 * LAYOUT.rowGap)
    // the single start node sits centred above the two approvals
    expect(pos.start.x).toBe((pos.lead.x + pos.dba.x) / 2)
  })

  it('uses the longest path, not the shortest', () => {
    const pos = autoLayout({
      nodes: [
        { id: 's', type: 'start' },
        { id: 'a', type: 'auto' },
        { id: 'e', type: 'end' },
      ],
      edges: [
        { from: 's', to: 'e' },
        { from: 's', to: 'a' },
        { from: 'a', to: 'e' },
      ],
    })
    expect(pos.e.y).toBeGreaterThan(pos.a.y)
  })

  it('places every node of a cyclic or disconnected graph, without looping', () => {
    const pos = autoLayout({
      nodes: [
        { id: 's', type: 'start' },
        { id: 'a', type: 'approval' },
        { id: 'b', type: 'approval' },
        { id: 'lonely', type: 'auto' },
        { id: 'err', type: 'error' },
      ],
      edges: [
        { from: 's', to: 'a' },
        { from: 'a', to: 'b' },
        { from: 'b', to: 'a' },
        { from: 'x', to: 'y' },
      ],
    })
    expect(Object.keys(pos).sort()).toEqual(['a', 'b', 'err', 'lonely', 's'])
    for (const p of Object.values(pos)) {
      expect(Number.isFinite(p.x)).toBe(true)
      expect(Number.isFinite(p.y)).toBe(true)
    }
  })
})

describe('canConnect', () => {
  const def = apiExample()
  def.nodes.push({ id: 'err', type: 'error' }, { id: 'stop', type: 'terminate' })
  it.each([
    ['lead', 'lead', 'itself'],
    ['lead', 'start', 'start node'],
    ['lead', 'err', 'error catcher'],
    ['end', 'lead', 'no outgoing'],
    ['stop', 'lead', 'no outgoing'],
    ['start', 'lead', 'already connected'],
    ['lead', 'nope', 'Both ends'],
  ])('refuses %s → %s (%s)', (from, to, why) => {
    expect(canConnect(def, from, to)).toContain(why)
  })
  it('allows a new edge between two ordinary nodes', () => {
    expect(canConnect(def, 'lead', 'dba')).toBeNull()
    expect(canConnect(def, 'err', 'end')).toBeNull()
  })
})

describe('conditionLabel', () => {
  it('shows the condition, shortened, and the default flag', () => {
    expect(conditionLabel({ from: 'a', to: 'b' })).toBeUndefined()
    expect(conditionLabel({ from: 'a', to: 'b', condition: { days: { $gte: 3 } } })).toBe('days ≥ 3')
    // with the forms' fields, their labels
    expect(conditionLabel({ from: 'a', to: 'b', condition: { days: { $gt: 3 } } }, [{ path: 'days', label: 'Days off' }])).toBe('Days off > 3')
    expect(conditionLabel({ from: 'a', to: 'b', default: true })).toBe('default')
    const long = conditionLabel({ from: 'a', to: 'b', condition: { some_really_long_field_name: { $in: ['alpha', 'beta', 'gamma', 'delta'] } } })!
    expect(long.length).toBeLessThanOrEqual(48)
    expect(long.endsWith('…')).toBe(true)
  })
})
