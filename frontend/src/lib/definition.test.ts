import { describe, expect, it } from 'vitest'
import { cleanDefinition, cleanNode, defaultNode, joinMode, layoutOf, newNodeId, parseDefinition, renameNode, retentionValid, starterDefinition, type DefNode, type Definition } from './definition'

describe('cleanNode', () => {
  it('drops fields that belong to other node types (the server refuses them)', () => {
    const n = { id: 'x', type: 'auto', name: 'X', sign: 'all', approvers: { users: ['a'] }, trigger: { kind: 'manual' }, interval: 5 } as DefNode
    expect(cleanNode(n)).toEqual({ id: 'x', type: 'auto', name: 'X' })
  })

  it('drops empty values and defaults, keeps what was set', () => {
    const n: DefNode = {
      id: 'lead',
      type: 'approval',
      name: 'Lead',
      join: 'and',
      is_ignore: false,
      timeout: '',
      plugins: { pre: [], after: [] },
      approvers: { users: ['bob', ' '], roles: [], context: '' },
      sign: 'all',
      error_handler: { operation: 'throw' },
      cc: {},
    }
    expect(cleanNode(n)).toEqual({ id: 'lead', type: 'approval', name: 'Lead', approvers: { users: ['bob'] }, sign: 'all' })
  })

  it('keeps a {min: N} join and a message trigger', () => {
    expect(cleanNode({ id: 'm', type: 'auto', join: { min: 2 } })).toEqual({ id: 'm', type: 'auto', join: { min: 2 } })
    expect(cleanNode({ id: 'm', type: 'auto', join: { min: 1.5 } })).toEqual({ id: 'm', type: 'auto' })
    const start: DefNode = { id: 'start', type: 'start', trigger: { kind: 'message', message: 'order.paid', members: ['stray'] } }
    expect(cleanNode(start)).toEqual({ id: 'start', type: 'start', trigger: { kind: 'message', message: 'order.paid' } })
    expect(joinMode({ min: 3 })).toBe('min')
    expect(joinMode('or')).toBe('or')
    expect(joinMode(undefined)).toBe('and')
  })

  it('keeps join or, timeouts, plugins, retry and catch handlers', () => {
    const n: DefNode = {
      id: 'g',
      type: 'auto',
      join: 'or',
      timeout: '30s',
      plugins: { pre: ['a'], after: [] },
      error_handler: { operation: 'retry', retry: { count: 5 } },
    }
    expect(cleanNode(n)).toEqual({ id: 'g', type: 'auto', join: 'or', timeout: '30s', plugins: { pre: ['a'], after: [] }, error_handler: { operation: 'retry', retry: { count: 5, period: '2s' } } })
    expect(cleanNode({ id: 'g', type: 'auto', error_handler: { operation: 'catch', catch: { branch: 'fix' }, retry: { count: 1 } } }).error_handler).toEqual({
      operation: 'catch',
      catch: { branch: 'fix' },
    })
  })

  it('keeps pass_ratio only for vote', () => {
    expect(cleanNode({ id: 'v', type: 'approval', sign: 'vote', pass_ratio: 0.6, approvers: { roles: ['r'] } }).pass_ratio).toBe(0.6)
    expect(cleanNode({ id: 'v', type: 'approval', sign: 'all', pass_ratio: 0.6, approvers: { roles: ['r'] } }).pass_ratio).toBeUndefined()
  })

  it('reduces a trigger to the fields of its kind and keeps explicit false flags', () => {
    const n: DefNode = {
      id: 'start',
      type: 'start',
      trigger: { kind: 'crontab', expr: '*/5 * * * *', allow_repeated: false, module: 'stray', form: { kind: 'components', fields: [] } },
    }
    expect(cleanNode(n).trigger).toEqual({ kind: 'crontab', expr: '*/5 * * * *', allow_repeated: false })
    const f = cleanNode({ id: 'start', type: 'start', trigger: { kind: 'form', form: { kind: 'components', fields: [] }, members: [], require_login: false } })
    expect(f.trigger).toEqual({ kind: 'form', form: { kind: 'components', fields: [] }, require_login: false })
  })

  it('gives a start node a manual trigger and an approval the or sign when missing', () => {
    expect(cleanNode({ id: 's', type: 'start' }).trigger).toEqual({ kind: 'manual' })
    expect(cleanNode({ id: 'a', type: 'approval' }).sign).toBe('or')
  })

  it('keeps on_timeout as a string or a branch object', () => {
    expect(cleanNode({ id: 'a', type: 'approval', on_timeout: 'remind' }).on_timeout).toBe('remind')
    expect(cleanNode({ id: 'a', type: 'approval', on_timeout: { branch: 'esc' } }).on_timeout).toEqual({ branch: 'esc' })
    expect(cleanNode({ id: 'a', type: 'approval', on_timeout: { branch: '' } }).on_timeout).toBeUndefined()
  })
})

describe('cleanDefinition', () => {
  it('puts positions under meta.layout only when asked, only for existing nodes, rounded', () => {
    const def: Definition = { ...starterDefinition(), layout: { start: { x: 1.4, y: 2.6 }, end: { x: 0, y: 0 }, gone: { x: 1, y: 1 } } }
    expect(cleanDefinition(def).meta).toBeUndefined()
    const out = cleanDefinition(def, { withLayout: true })
    expect(out.meta).toEqual({ layout: { start: { x: 1, y: 3 }, end: { x: 0, y: 0 } } })
    expect(out.layout).toBeUndefined()
  })
  it("keeps other editors' meta, and drops a stale meta.layout when positions are not asked for", () => {
    const def: Definition = { nodes: [], edges: [], meta: { owner: 'ops', layout: { a: { x: 1, y: 1 } } } }
    expect(cleanDefinition(def)).toEqual({ nodes: [], edges: [], meta: { owner: 'ops' } })
  })
  it('keeps node and edge meta', () => {
    const def: Definition = { nodes: [{ id: 'e', type: 'end', meta: { color: 'red' } }], edges: [{ from: 'a', to: 'e', meta: { bend: 1 } }] }
    expect(cleanDefinition(def)).toEqual(def)
  })
  it('keeps group_sign on an approval with groups only', () => {
    const n: DefNode = { id: 'a', type: 'approval', approvers: { groups: [['x'], ['y']] }, group_sign: 'all' }
    expect(cleanNode(n).group_sign).toBe('all')
    expect(cleanNode({ ...n, approvers: { users: ['x'] } }).group_sign).toBeUndefined()
  })
  it('keeps the options (retention and any other), without empty values', () => {
    const def: Definition = { nodes: [], edges: [], options: { retention: ' 720h ', dedupe: 'any' } }
    expect(cleanDefinition(def).options).toEqual({ retention: '720h', dedupe: 'any' })
    expect(cleanDefinition({ nodes: [], edges: [], options: { retention: '' } }).options).toBeUndefined()
    expect(cleanDefinition({ nodes: [], edges: [], options: { retention: '0' } }).options).toEqual({ retention: '0' })
    expect(parseDefinition(JSON.stringify({ nodes: [], options: { retention: '24h' } })).options).toEqual({ retention: '24h' })
    expect(() => parseDefinition(JSON.stringify({ nodes: [], options: 'forever' }))).toThrow('"options" must be an object.')
  })
  it('drops empty conditions and false defaults on edges', () => {
    const def: Definition = { nodes: [], edges: [{ from: 'a', to: 'b', condition: {}, default: false }] }
    expect(cleanDefinition(def).edges).toEqual([{ from: 'a', to: 'b' }])
  })
})

describe('newNodeId', () => {
  it('numbers ids per type', () => {
    expect(newNodeId('approval', [])).toBe('approval')
    expect(newNodeId('approval', ['approval'])).toBe('approval_2')
    expect(newNodeId('approval', ['approval', 'approval_2', 'approval_4'])).toBe('approval_3')
  })
})

describe('defaultNode', () => {
  it('creates nodes of every type with their id and a name', () => {
    expect(defaultNode('approval', 'approval_2')).toMatchObject({ id: 'approval_2', type: 'approval', sign: 'or' })
    expect(defaultNode('start', 'start')).toMatchObject({ trigger: { kind: 'manual' } })
  })
})

describe('renameNode', () => {
  const def = (): Definition => ({
    nodes: [
      { id: 's', type: 'start' },
      { id: 'a', type: 'approval', on_timeout: { branch: 'b' } },
      { id: 'b', type: 'callback', timeout_branch: 'b', error_handler: { operation: 'catch', catch: { branch: 'b' } } },
      { id: 'e', type: 'end' },
    ],
    edges: [
      { from: 's', to: 'a' },
      { from: 'a', to: 'b' },
      { from: 'b', to: 'e' },
    ],
    layout: { b: { x: 5, y: 6 } },
  })

  it('renames the node, its edges, branches and layout', () => {
    const d = def()
    expect(renameNode(d, 'b', 'wait')).toBeNull()
    expect(d.nodes.map((n) => n.id)).toEqual(['s', 'a', 'wait', 'e'])
    expect(d.edges).toEqual([
      { from: 's', to: 'a' },
      { from: 'a', to: 'wait' },
      { from: 'wait', to: 'e' },
    ])
    expect(d.nodes[1].on_timeout).toEqual({ branch: 'wait' })
    expect(d.nodes[2].timeout_branch).toBe('wait')
    expect(d.nodes[2].error_handler?.catch?.branch).toBe('wait')
    expect(d.layout).toEqual({ wait: { x: 5, y: 6 } })
  })

  it('moves a position kept in meta.layout too', () => {
    const d: Definition = { ...def(), layout: undefined, meta: { layout: { b: { x: 1, y: 2 } } } }
    expect(renameNode(d, 'b', 'c')).toBeNull()
    expect(d.meta).toEqual({ layout: { c: { x: 1, y: 2 } } })
  })

  it.each([
    ['', 'empty'],
    ['a', 'already'],
    ['has space', 'letters'],
  ])('refuses %j and changes nothing', (to, why) => {
    const d = def()
    expect(renameNode(d, 'b', to)).toContain(why)
    expect(d).toEqual(def())
  })
})

describe('parseDefinition', () => {
  it('reads a definition, or the definition inside a template/version object', () => {
    const d = starterDefinition()
    expect(parseDefinition(JSON.stringify(d)).nodes).toHaveLength(2)
    expect(parseDefinition(JSON.stringify({ key: 'k', version: 3, definition: d })).edges).toEqual(d.edges)
  })
  it('reads positions kept in meta.layout', () => {
    const d = parseDefinition(JSON.stringify({ nodes: [{ id: 's', type: 'start' }], edges: [], meta: { layout: { s: { x: 5, y: 6 } } } }))
    expect(layoutOf(d)).toEqual({ s: { x: 5, y: 6 } })
  })
  it('defaults missing edges to []', () => {
    expect(parseDefinition('{"nodes":[{"id":"s","type":"start"}]}').edges).toEqual([])
  })
  it.each([
    ['not json', 'Not valid JSON'],
    ['[1]', '"nodes" must be an array'],
    ['{"nodes":[{"type":"start"}]}', 'has no "id"'],
    ['{"nodes":[{"id":"x","type":"gateway"}]}', 'unknown type "gateway"'],
    ['{"nodes":[],"edges":[{"from":"a"}]}', 'needs "from" and "to"'],
  ])('explains what is wrong with %s', (text, msg) => {
    expect(() => parseDefinition(text)).toThrow(msg)
  })
})

describe('retentionValid', () => {
  it('takes empty (the deployment’s setting), 0 (for ever) and Go durations', () => {
    for (const ok of ['', '  ', undefined, '0', '720h', '1h30m', '90s', '1.5h', '10ms', '2µs']) expect([ok, retentionValid(ok)]).toEqual([ok, true])
  })
  it('refuses what the server would not parse', () => {
    for (const bad of ['30d', '720', 'h', '1 h', '-1h', 'forever', '1h-']) expect([bad, retentionValid(bad)]).toEqual([bad, false])
  })
})
