import { afterEach, describe as group, expect, it } from 'vitest'
import { definitionSchema } from '@/generated/definition'
import { setLanguage } from '@/i18n'
import helpZhCN from '@/i18n/field-help.zh-CN'
import { COMMON_FIELDS, JOIN_MODES, NODE_TYPES, TRIGGER_FIELDS, TRIGGER_KINDS, TYPE_FIELDS, checkNodeId, describe, describedFields, example } from './schema'

group('the designer reads the definition schema', () => {
  afterEach(() => setLanguage('en', false))

  it('has the node types and trigger kinds of the Go types', () => {
    expect(NODE_TYPES).toEqual(['start', 'approval', 'auto', 'delay', 'callback', 'subprocess', 'error', 'end', 'terminate'])
    expect(TRIGGER_KINDS).toEqual(['manual', 'crontab', 'sync-api', 'async-api', 'form', 'message'])
    expect(JOIN_MODES).toEqual(['and', 'or'])
  })

  it('knows which fields each node type owns, and which every node has', () => {
    expect(TYPE_FIELDS.approval).toEqual(['approvers', 'sign', 'pass_ratio', 'group_sign', 'on_timeout', 'form', 'on_no_approver', 'exclude_initiator'])
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
    expect(checkNodeId('a.b')).toContain('letters, digits, "_" and "-"')
    expect(checkNodeId('x'.repeat(129))).toContain('at most 128')
    expect(checkNodeId('')).toContain('empty')
    setLanguage('zh-CN', false)
    expect(checkNodeId('a.b')).toBe('ID 只能包含字母、数字、“_”和“-”。')
    expect(checkNodeId('x'.repeat(129))).toBe('ID 最多 128 个字符。')
    expect(checkNodeId('')).toBe('ID 不能为空。')
  })

  it('says the id rule with the characters the schema allows (the messages cannot drift from it)', () => {
    // The schema's own words name the allowed punctuation in quotes: both languages' messages name the same.
    const rule = definitionSchema.$defs.Node.properties.id['x-pattern-message']
    const allowed = [...rule.matchAll(/'(.)'/g)].map((m) => m[1])
    expect(allowed.length).toBeGreaterThan(0)
    for (const lang of ['en', 'zh-CN'] as const) {
      setLanguage(lang, false)
      const said = checkNodeId('a b')!
      expect([...said.matchAll(/["“](.)["”]/g)].map((m) => m[1]), lang).toEqual(allowed)
    }
  })

  it('gives the Go doc comments as help text', () => {
    expect(describe('Node', 'timeout')).toMatch(/duration/)
    expect(describe('Trigger', 'allow_remote_ips')).toMatch(/CIDR/)
    expect(describe('Node', 'no_such_field')).toBe('')
    expect(example('Trigger', 'expr')).toBe('*/5 * * * *')
  })

  it('gives the help text in Chinese to a Chinese user, the English where a translation is missing', () => {
    expect(describe('Node', 'timeout', 'zh-CN')).toMatch(/时长/)
    expect(describe('Node', 'timeout', 'zh-CN')).toBe(helpZhCN['Node.timeout'])
    expect(describe('Node', 'timeout', 'en')).toBe(describe('Node', 'timeout'))
    expect(describe('Node', 'no_such_field', 'zh-CN')).toBe('')
  })

  it('speaks the UI language unless told otherwise (the i18n module decides it, as for every message)', () => {
    setLanguage('zh-CN', false)
    expect(describe('Node', 'timeout')).toBe(helpZhCN['Node.timeout'])
    setLanguage('en', false)
    expect(describe('Node', 'timeout')).toMatch(/duration/)
  })

  it('has a Chinese translation of every field description, and none for a field that is gone', () => {
    const fields = describedFields()
    expect(fields).toContain('Node.timeout')
    expect(fields).toContain('Trigger.message')
    expect(Object.keys(helpZhCN).sort()).toEqual([...fields].sort())
    for (const f of fields) {
      const [type, field] = f.split('.') as [Parameters<typeof describe>[0], string]
      const zh = describe(type, field, 'zh-CN')
      expect(zh, f).not.toBe(describe(type, field, 'en'))
      expect(zh, `${f} is not Chinese`).toMatch(/[\u4e00-\u9fff]/)
    }
  })
})
