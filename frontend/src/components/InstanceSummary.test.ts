// @vitest-environment happy-dom
// The request summary names the process in the user's language (not its key), and keeps the key when the name
// cannot be read.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { flushPromises, mount } from '@vue/test-utils'
import { i18n, setLanguage } from '@/i18n'
import type { Instance } from '@/api'

const templates = vi.fn()
vi.mock('@/api', () => ({ api: { templates: (...a: unknown[]) => templates(...a) } }))

const InstanceSummary = (await import('./InstanceSummary.vue')).default
const instance = { id: 'i1', template: 'leave', version: 3, status: 'running', initiator: 'ann', created_at: '2026-11-28T10:00:00Z' } as Instance

afterEach(() => setLanguage('en', false))

describe('InstanceSummary', () => {
  it('shows the template by its name in the user language, then its key', async () => {
    templates.mockResolvedValue([{ key: 'leave', name: 'Leave', latest_version: 3, i18n: { 'zh-CN': { name: '请假申请' }, en: { name: 'Leave request' } } }])
    setLanguage('zh-CN', false)
    const w = mount(InstanceSummary, { props: { instance }, global: { plugins: [i18n], stubs: { StatusTag: true } } })
    await flushPromises()
    expect(w.find('[data-test=summary-template]').text()).toContain('请假申请')
    expect(w.find('[data-test=summary-template]').text()).toContain('v3')
    setLanguage('en', false)
    await flushPromises()
    expect(w.find('[data-test=summary-template]').text()).toContain('Leave request')
    const other = mount(InstanceSummary, {
      props: { instance: { ...instance, template: 'unknown-key' } },
      global: { plugins: [i18n], stubs: { StatusTag: true } },
    })
    await flushPromises()
    expect(other.find('[data-test=summary-template]').text()).toContain('unknown-key')
  })
})
