import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { computed } from 'vue'
import { language, setLanguage } from '@/i18n'
import { cleanDefinition, type Definition } from './definition'
import { displayRows, validateValues, type FormField, type FormSchema } from './form'
import { instanceTitle, localized, localizeField, localizeForm, nodeName, stepName, templateText } from './labels'
import { startFormOf } from './startForm'
import { buildTimeline } from './timeline'

afterEach(() => setLanguage('en', false))

describe('localized', () => {
  const leave = { name: 'Leave', description: 'plain', i18n: { 'zh-CN': { name: '请假申请', description: '  ' }, en: { name: 'Leave request' } } }
  it('reads the language asked for and falls back to the plain text', () => {
    expect(localized(leave, 'name', 'zh-CN')).toBe('请假申请')
    expect(localized(leave, 'name', 'en')).toBe('Leave request')
    expect(localized(leave, 'description', 'zh-CN')).toBe('plain') // blank: the plain text
    expect(localized(leave, 'description', 'en')).toBe('plain')
    expect(localized({ name: 'x' }, 'name', 'en')).toBe('x')
    expect(localized(undefined, 'name' as never, 'en')).toBe('')
  })
  it('follows the language switch', () => {
    const name = computed(() => templateText(leave).name)
    setLanguage('zh-CN', false)
    expect(language.value).toBe('zh-CN')
    expect(name.value).toBe('请假申请')
    setLanguage('en', false)
    expect(name.value).toBe('Leave request')
  })
})

const days: FormField = {
  id: 'days',
  type: 'select',
  label: 'Days',
  field: 'days',
  required: true,
  placeholder: 'How many?',
  help: 'Working days',
  options: [
    { value: '1', label: 'One', i18n: { 'zh-CN': { label: '一天' } } },
    { value: '2', label: 'Two' },
  ],
  i18n: { 'zh-CN': { label: '天数', help: '工作日天数' }, en: { label: 'Days off' } },
}

describe('form labels', () => {
  it('gives a field its texts in the language, each falling back to the plain one', () => {
    const zh = localizeField(days, 'zh-CN')
    expect([zh.label, zh.placeholder, zh.help, zh.options!.map((o) => o.label)]).toEqual(['天数', 'How many?', '工作日天数', ['一天', 'Two']])
    const en = localizeField(days, 'en')
    expect([en.label, en.placeholder, en.help, en.options!.map((o) => o.label)]).toEqual(['Days off', 'How many?', 'Working days', ['One', 'Two']])
    expect(days.label).toBe('Days') // the definition is not changed
    const plain: FormField = { id: 'x', type: 'input', label: 'X', field: 'x' }
    expect(localizeField(plain, 'zh-CN')).toBe(plain)
  })
  it('shows values, errors and read-only rows in the user\'s language, and switches with it', () => {
    const schema: FormSchema = { kind: 'components', fields: [days] }
    const rows = computed(() => displayRows(schema, { days: '1' }))
    const errors = computed(() => validateValues(schema, {}))
    const shown = computed(() => localizeForm(schema).fields![0].label)
    setLanguage('zh-CN', false)
    expect(rows.value).toMatchObject([{ label: '天数', value: '一天' }])
    expect(errors.value.days).toContain('天数')
    expect(shown.value).toBe('天数')
    setLanguage('en', false)
    expect(rows.value).toMatchObject([{ label: 'Days off', value: 'One' }])
    expect(errors.value.days).toContain('Days off')
    expect(shown.value).toBe('Days off')
  })
})

describe('names and titles', () => {
  const node = { id: 'lead', name: 'Team lead', i18n: { 'zh-CN': { name: '直属上级审批' } } }
  it('names a node in the language, else its name, else its id', () => {
    expect(nodeName(node, 'zh-CN')).toBe('直属上级审批')
    expect(nodeName(node, 'en')).toBe('Team lead')
    expect(nodeName({ id: 'x' }, 'en')).toBe('x')
    const def = { nodes: [node] }
    expect(stepName(def, { node_id: 'lead', node_name: 'Team lead' }, 'zh-CN')).toBe('直属上级审批')
    expect(stepName(undefined, { node_id: 'lead', node_name: 'Team lead' }, 'zh-CN')).toBe('Team lead')
    expect(stepName(def, { node_id: 'gone' }, 'zh-CN')).toBe('gone')
  })
  it("shows a request's title in the language it was rendered in, else its title", () => {
    const inst = { title: 'Hana · 3 days', title_i18n: { 'zh-CN': 'Hana · 3 天', en: 'Hana · 3 days' } }
    expect(instanceTitle(inst, '', 'zh-CN')).toBe('Hana · 3 天')
    expect(instanceTitle({ title: 'Mine' }, '', 'zh-CN')).toBe('Mine')
    expect(instanceTitle({ title: '' }, 'Leave', 'zh-CN')).toBe('Leave')
    expect(instanceTitle(undefined, 'Leave')).toBe('Leave')
  })
})

describe('the ready-made leave request', () => {
  const leave = JSON.parse(readFileSync(resolve(__dirname, '../../../templates/leave.json'), 'utf8')) as { definition: Definition }
  it('asks for its start form in both languages', () => {
    const form = startFormOf(leave.definition)!.schema
    expect(localizeForm(form, 'zh-CN').fields!.map((f) => f.label)).toEqual(['天数', '开始日期', '请假事由'])
    expect(localizeForm(form, 'en').fields!.map((f) => f.label)).toEqual(['Days', 'First day', 'Reason'])
  })
  it('names its changes in the timeline in the language', () => {
    const fields = new Map(startFormOf(leave.definition)!.schema.fields!.map((f) => [f.field!, f]))
    const item = { id: 'h1', action: 'context.changed', actor: 'hana', at: '2026-11-28T09:00:00Z', data: { changes: [{ path: 'days', before: 5, after: 3 }] } }
    setLanguage('zh-CN', false)
    const zh = buildTimeline([item as never], fields).entries.flatMap((e) => e.changes ?? [])
    setLanguage('en', false)
    const en = buildTimeline([item as never], fields).entries.flatMap((e) => e.changes ?? [])
    expect(zh.map((c) => c.label)).toEqual(['天数'])
    expect(en.map((c) => c.label)).toEqual(['Days'])
  })
  it('keeps its labels and title pattern through the designer', () => {
    const clean = cleanDefinition(leave.definition)
    expect(clean.title_pattern).toBe(leave.definition.title_pattern)
    expect(clean.i18n).toEqual(leave.definition.i18n)
    expect(clean.nodes.find((n) => n.id === 'lead')?.i18n).toEqual({ 'zh-CN': { name: '直属上级审批' }, en: { name: 'Team lead' } })
    // Blank texts are dropped, not saved.
    const blank = cleanDefinition({ ...leave.definition, title_pattern: '  ', i18n: { 'zh-CN': { name: ' ' } } })
    expect(blank.title_pattern).toBeUndefined()
    expect(blank.i18n).toBeUndefined()
  })
})
