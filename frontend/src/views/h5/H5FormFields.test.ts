// @vitest-environment happy-dom
// The phone's form fields name every control for assistive technology (axe's label and aria-toggle-field-name) and
// the user picker opens from its field, by tap or by Enter, without a clickable cell around an input
// (nested-interactive).
import { describe, expect, it, vi } from 'vitest'
import { flushPromises, mount } from '@vue/test-utils'
import { createI18n } from 'vue-i18n'
import en from '@/i18n/en'
import zhCN from '@/i18n/zh-CN'
import type { FormSchema } from '@/lib/form'

vi.mock('@/api', () => ({ api: { users: () => Promise.resolve([{ username: 'zhouyu', display_name: '周宇', roles: [] }]) } }))
const H5FormFields = (await import('./H5FormFields.vue')).default
const { useDirectory } = await import('@/stores/directory')

const schema: FormSchema = {
  kind: 'components',
  fields: [
    { id: 'from', type: 'date', label: 'From day', field: 'from' },
    { id: 'span', type: 'date-range', label: 'Trip', field: 'span' },
    { id: 'escalate', type: 'switch', label: 'Escalate', field: 'escalate' },
    { id: 'deputy', type: 'user', label: 'Who covers', field: 'deputy' },
  ],
}

describe.each([
  ['en', en],
  ['zh-CN', zhCN],
] as const)('H5FormFields in %s', (locale, msgs) => {
  it('names its controls and opens the user picker from the field', async () => {
    const i18n = createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN }, missingWarn: false, fallbackWarn: false })
    const w = mount(H5FormFields, { props: { schema, modelValue: {} }, global: { plugins: [i18n], stubs: { H5UserPicker: true } }, attachTo: document.body })
    expect(w.find('[data-field=from] input[type=date]').attributes('aria-label')).toBe('From day')
    const range = w.findAll('[data-field=span] input[type=date]').map((x) => x.attributes('aria-label'))
    expect(range).toEqual([`Trip: ${msgs.form.from}`, `Trip: ${msgs.form.to}`])
    expect(w.find('[data-field=escalate] [role=switch]').attributes('aria-label')).toBe('Escalate')
    const user = w.find('[data-field=deputy]')
    expect(user.classes()).not.toContain('van-cell--clickable')
    expect(user.find('[role=button]').exists()).toBe(false)
    expect(w.find('.picker-body').exists()).toBe(false)
    await user.find('input').trigger('click')
    await flushPromises()
    expect(w.find('.picker-body').exists()).toBe(true)
    w.unmount()

    // by the keyboard: Enter on the field opens it too
    const k = mount(H5FormFields, { props: { schema, modelValue: {} }, global: { plugins: [i18n], stubs: { H5UserPicker: true } }, attachTo: document.body })
    await k.find('[data-field=deputy] input').trigger('keydown', { key: 'Enter' })
    await flushPromises()
    expect(k.find('.picker-body').exists()).toBe(true)
    k.unmount()
  })

  it('shows a chosen person by name, not username', async () => {
    await useDirectory().loadUsers()
    const i18n = createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN }, missingWarn: false, fallbackWarn: false })
    const w = mount(H5FormFields, { props: { schema, modelValue: { deputy: 'zhouyu' } }, global: { plugins: [i18n], stubs: { H5UserPicker: true } } })
    expect((w.find('[data-field=deputy] input').element as HTMLInputElement).value).toBe('周宇')
    w.unmount()
  })
})
