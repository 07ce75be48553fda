/// <reference types="node" />
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { addBranch, compileFlow, insert, parseFlow, removeBranch, removeItem, type BlockItem, type Branch, type Flow, type Item } from './builder'
import type { DefNode, Definition } from './definition'

const TEMPLATES = join(import.meta.dirname, '../../../templates')

function templates(): [string, Definition][] {
  return readdirSync(TEMPLATES)
    .filter((f) => f.endsWith('.json'))
    .map((f) => [f, JSON.parse(readFileSync(join(TEMPLATES, f), 'utf8')).definition as Definition])
}

function parsed(def: Definition): Flow {
  const r = parseFlow(def)
  if (!r.ok) throw new Error(r.reason)
  return r.flow
}

describe('the business designer reads and writes every ready-made template without loss', () => {
  const all = templates()
  it('finds the templates', () => expect(all.length).toBeGreaterThanOrEqual(7))
  for (const [file, def] of all) {
    it(file, () => {
      const flow = parsed(def)
      expect(compileFlow(flow)).toEqual(def)
    })
  }
  it('reads leave as a condition branch (more than 3 days → department leader, otherwise straight on) joined at the end', () => {
    const def = Object.fromEntries(all)['leave.json']
    const flow = parsed(def)
    expect(flow.main.map((i) => (i.kind === 'block' ? `[${i.mode}]` : i.id))).toEqual(['start', 'lead', '[condition]', 'end'])
    const b = flow.main[2] as BlockItem
    expect(b.branches.map((x) => [x.edge, x.items.map((i) => (i.kind === 'node' ? i.id : i.kind))])).toEqual([
      [{ condition: def.edges[1].condition }, ['manager']],
      [{ default: true }, []],
    ])
  })
  it('shows the "otherwise" branch last whatever the order of the edges, and writes the edges in their order', () => {
    const def = Object.fromEntries(all)['leave.json']
    const swapped = { ...def, edges: [def.edges[0], def.edges[2], def.edges[1], def.edges[3]] }
    const flow = parsed(swapped)
    expect((flow.main[2] as BlockItem).branches.map((b) => !!b.edge?.default)).toEqual([false, true])
    expect(compileFlow(flow)).toEqual(swapped)
  })
  it('reads the callback\'s timeout branch and the error node as side chains', () => {
    const flow = parsed(Object.fromEntries(all)['resource-provision.json'])
    expect(flow.side.map((s) => [s.root, s.items.map((i) => (i.kind === 'block' ? 'block' : i.id))])).toEqual([
      ['escalate', ['escalate', 'end-escalated']],
      ['failed', ['failed', 'triage', 'end-error']],
    ])
  })
  it('reads table-permission\'s two conditional reviews that meet before the grant as a branch that splits again', () => {
    const flow = parsed(Object.fromEntries(all)['table-permission.json'])
    const b = flow.main[2] as BlockItem
    expect(b.mode).toBe('condition')
    expect(b.branches).toHaveLength(2)
    expect(b.branches[0].edge).toBeUndefined()
    expect(b.branches[0].items[0].kind).toBe('block')
  })
})

describe('what the business designer cannot show, it says', () => {
  const base = (): Definition => ({
    nodes: [
      { id: 'start', type: 'start', trigger: { kind: 'manual' } },
      { id: 'a', type: 'approval', approvers: { users: ['bob'] } },
      { id: 'b', type: 'approval', approvers: { users: ['carol'] } },
      { id: 'end', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'a', condition: { x: 1 } },
      { from: 'start', to: 'b', default: true },
      { from: 'a', to: 'end' },
      { from: 'b', to: 'end' },
    ],
  })
  it('shows the base', () => expect(parseFlow(base()).ok).toBe(true))
  it('a cross-branch edge', () => {
    const d = base()
    d.edges.push({ from: 'a', to: 'b' })
    const r = parseFlow(d)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.reason).toMatch(/branch/)
  })
  it('a loop back', () => {
    const d = base()
    d.edges.push({ from: 'b', to: 'a' })
    expect(parseFlow(d).ok).toBe(false)
  })
  it('no start', () => {
    const d = base()
    d.nodes.shift()
    d.edges.splice(0, 2)
    expect(parseFlow(d).ok).toBe(false)
  })
  it('an edge to a missing node', () => {
    const d = base()
    d.edges.push({ from: 'a', to: 'nowhere' })
    expect(parseFlow(d).ok).toBe(false)
  })
})

// ---- random structured definitions ----

function rng(seed: number) {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

/** randomDefinition builds a random tree of steps and branches (as the builder makes them) and writes it out. */
function randomDefinition(seed: number): Definition {
  const r = rng(seed)
  const nodes: Record<string, DefNode> = {}
  let n = 0
  const node = (): Item => {
    const id = `n${++n}`
    const types = ['approval', 'auto', 'delay', 'callback'] as const
    const type = types[Math.floor(r() * types.length)]
    nodes[id] = type === 'approval' ? { id, type, approvers: { users: [`u${n}`] } } : type === 'delay' ? { id, type, interval: n } : { id, type, name: `step ${n}` }
    return { kind: 'node', id }
  }
  const chain = (depth: number, len: number): Item[] => {
    const items: Item[] = []
    for (let i = 0; i < len; i++) {
      items.push(node())
      if (depth < 3 && r() < 0.45) {
        const parallel = r() < 0.4
        const count = 2 + Math.floor(r() * 3)
        const branches: Branch[] = []
        let empty = false
        for (let b = 0; b < count; b++) {
          const last = b === count - 1
          let items2: Item[]
          if (!empty && r() < 0.25) {
            empty = true
            items2 = []
          } else items2 = chain(depth + 1, 1 + Math.floor(r() * 3))
          const br: Branch = { items: items2 }
          if (!parallel) br.edge = last && r() < 0.6 ? { default: true } : { condition: { [`f${n}_${b}`]: { $gt: b } } }
          branches.push(br)
        }
        items.push({ kind: 'block', mode: parallel ? 'parallel' : 'condition', branches })
        // a block in the middle of a chain meets at its next node; at the end of a branch, at the outer one
        if (i === len - 1 && depth === 0) items.push(node())
      }
    }
    return items
  }
  const main: Item[] = [{ kind: 'node', id: 'start' }, ...chain(0, 1 + Math.floor(r() * 4)), { kind: 'node', id: 'end' }]
  nodes.start = { id: 'start', type: 'start', trigger: { kind: 'manual' } }
  nodes.end = { id: 'end', type: 'end' }
  const flow: Flow = { main, side: [], nodes, nodeOrder: Object.keys(nodes), edgeOrder: [], edgeExtras: {}, rest: {} }
  return compileFlow(flow)
}

describe('random structured definitions round-trip', () => {
  for (let seed = 1; seed <= 300; seed++) {
    it(`seed ${seed}`, () => {
      const def = randomDefinition(seed)
      const flow = parsed(def)
      expect(compileFlow(flow)).toEqual(def)
      // and a second time, from what was written
      expect(compileFlow(parsed(compileFlow(flow)))).toEqual(def)
    })
  }
})

describe('editing in the business designer', () => {
  const leave = () => Object.fromEntries(templates())['leave.json']

  it('inserts an approval between two steps: the edge goes through it', () => {
    const { flow, select } = insert(parsed(leave()), { steps: [] }, 1, 'approval')
    const def = compileFlow(flow)
    expect(def.edges).toContainEqual({ from: 'start', to: select })
    expect(def.edges).toContainEqual({ from: select!, to: 'lead' })
    expect(def.edges.some((e) => e.from === 'start' && e.to === 'lead')).toBe(false)
    expect(parseFlow(def).ok).toBe(true)
  })
  it('inserts a CC step: an automatic step marked as the builder\'s CC', () => {
    const { flow, select } = insert(parsed(leave()), { steps: [] }, 1, 'cc')
    expect(flow.nodes[select!]).toMatchObject({ type: 'auto', meta: { builder: 'cc' } })
  })
  it('inserts a condition branch: a branch with an approval and an "otherwise" straight on', () => {
    const { flow, select } = insert(parsed(leave()), { steps: [] }, 1, 'condition')
    const def = compileFlow(flow)
    expect(def.edges).toContainEqual({ from: 'start', to: select })
    expect(def.edges).toContainEqual({ from: 'start', to: 'lead', default: true })
    expect(def.edges).toContainEqual({ from: select, to: 'lead' })
    const again = parsed(def)
    expect(again.main.map((i) => i.kind)).toEqual(['node', 'block', 'node', 'block', 'node'])
  })
  it('inserts a parallel branch after a block with a junction to split at', () => {
    const f = parsed(leave())
    // after the condition block of leave (index 3 is the end): the block needs a node to split at → a junction
    const { flow } = insert(f, { steps: [] }, 3, 'parallel')
    const def = compileFlow(flow)
    const junction = def.nodes.find((n) => n.type === 'auto' && !f.nodes[n.id])!
    expect(junction).toBeTruthy()
    expect(def.edges.filter((e) => e.from === junction.id)).toHaveLength(2)
    expect(parseFlow(def).ok).toBe(true)
  })
  it('adds a branch before the default and removes it again', () => {
    const f = parsed(leave())
    const { flow, select } = addBranch(f, { steps: [] }, 2)
    const b = flow.main[2] as BlockItem
    expect(b.branches.map((x) => !!x.edge?.default)).toEqual([false, false, true])
    expect(compileFlow(flow).edges).toContainEqual({ from: 'lead', to: select })
    const back = removeBranch(flow, { steps: [] }, 2, 1)
    expect(compileFlow(back)).toEqual(leave())
  })
  it('removing the last branch but one leaves its steps in the chain', () => {
    const f = parsed(leave())
    const g = removeBranch(f, { steps: [] }, 2, 1)
    expect(compileFlow(g).edges).toEqual([
      { from: 'start', to: 'lead' },
      { from: 'lead', to: 'manager' },
      { from: 'manager', to: 'end' },
    ])
  })
  it('removes a step: its neighbours are joined', () => {
    const g = removeItem(parsed(leave()), { steps: [[2, 0]] }, 0)
    // manager gone: its branch is empty, and so is the default: two edges lead→end cannot be
    expect(() => compileFlow(g)).toThrow(/lead|Team lead/)
  })
})
