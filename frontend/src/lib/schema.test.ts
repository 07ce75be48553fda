import { describe as group, expect, it } from 'vitest'
import { definitionSchema } from '@/generated/definition'
import { COMMON_FIELDS, JOIN_MODES, NODE_TYPES, TRIGGER_FIELDS, TRIGGER_KINDS, TYPE_FIELDS, checkNodeId, describe, example } from './schema'

group('the designer reads the definition schema', () => {
  it('has the node types and trigger kinds of the Go types', () => {
    expect(NODE_TYPES).toEqual(['start', 'approval', 'auto', 'delay', 'callback', 'error', 'end', 'terminate'])
    expect(TRIGGER_KINDS).toEqual(['manual', 'crontab', 'sync-api', 'async-api', 'form', 'message'])
    expect(JOIN_MODES).toEqual(['and', 'or'])
  })

  it('knows which fields each node type owns, and which every node has', () => {
    expect(TYPE_FIELDS.approval).toEqual(['approvers', 'sign', 'pass_ratio', 'group_sign', 'on_timeout', 'form'])
    expect(TYPE_FIELDS.start).toEqual(['trigger'])
    expect(TYPE_FIELDS.delay).toEqual(['interval', 'until'])
    expect(TYPE_FIELDS.auto).toEqual([])
    expect(COMMON_FIELDS).toContain('timeout')
    expect(COMMON_FIELDS).not.toContain('sign')
    // Every property of a node is either common or owned by some type: none is lost.
    const all = new Set([...COMMON_FIELDS, ...Object.values(TYPE_FIELDS).flat()])
    expect([...all].sort()).toEqual(Object.keys(definitionSchema.$defs.Node.properties).sort())
  })

  it('knows which fields each trigger kind owns', () => {
    expect(TRIGGER_FIELDS.manual).toEqual([])
    expect(TRIGGER_FIELDS['sync-api']).toEqual(TRIGGER_FIELDS['async-api'])
    expect(TRIGGER_FIELDS['sync-api']).toContain('allow_remote_ips')
    expect(TRIGGER_FIELDS.form).toEqual(['form', 'members', 'require_login'])
    expect(TRIGGER_FIELDS.message).toEqual(['message'])
  })

  it('checks node ids as the server does', () => {
    expect(checkNodeId('lead_2-b')).toBeNull()
    expect(checkNodeId('a.b')).toContain("letters, digits, '_' and '-'")
    expect(checkNodeId('x'.repeat(129))).toContain('at most 128')
    expect(checkNodeId('')).toContain('empty')
  })

  it('gives the Go doc comments as help text', () => {
    expect(describe('Node', 'timeout')).toMatch(/duration/)
    expect(describe('Trigger', 'allow_remote_ips')).toMatch(/CIDR/)
    expect(describe('Node', 'no_such_field')).toBe('')
    expect(example('Trigger', 'expr')).toBe('*/5 * * * *')
  })
})
