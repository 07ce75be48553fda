// @vitest-environment happy-dom
// The notification settings page when its settings do not load: the error state with a retry, no form, and no way
// to save — saving the defaults the empty form holds would overwrite the tenant's settings.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { createI18n } from 'vue-i18n'
import ElementPlus from 'element-plus'
import en from '@/i18n/en'
import zhCN from '@/i18n/zh-CN'
import { ApiError } from '@/api/client'

const notificationSettings = vi.fn()
const channels = vi.fn()
const saveNotificationSettings = vi.fn()
vi.mock('@/api', () => ({
  api: {
    notificationSettings: (...a: unknown[]) => notificationSettings(...a),
    channels: (...a: unknown[]) => channels(...a),
    saveNotificationSettings: (...a: unknown[]) => saveNotificationSettings(...a),
  },
}))

const View = (await import('./NotificationSettingsView.vue')).default

function mountIn(locale: 'en' | 'zh-CN') {
  const i18n = createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN }, missingWarn: false, fallbackWarn: false })
  return mount(View as never, { global: { plugins: [i18n, ElementPlus], stubs: { RouterLink: RouterLinkStub, NotifyAdminTabs: true } } })
}

beforeEach(() => {
  notificationSettings.mockReset()
  channels.mockReset()
  saveNotificationSettings.mockReset()
})
afterEach(() => {
  document.body.innerHTML = ''
})

describe.each([
  ['en', en],
  ['zh-CN', zhCN],
] as const)('notification settings in %s', (locale, msgs) => {
  it('a failed load shows the error and no form, cannot save, and a retry loads the settings', async () => {
    notificationSettings.mockRejectedValueOnce(new ApiError(503, 'unavailable', 'the database is not reachable'))
    channels.mockResolvedValue([])
    const w = mountIn(locale)
    await flushPromises()
    const err = w.find('[data-test=load-error]')
    expect(err.exists()).toBe(true)
    expect(err.text()).toContain(msgs.common.loadFailed)
    expect(err.text()).toContain('the database is not reachable')
    expect(w.find('[data-test=settings-language]').exists()).toBe(false)
    const save = w.find('[data-test=save-notification-settings]')
    expect(save.attributes('disabled')).toBeDefined()
    await save.trigger('click')
    await flushPromises()
    expect(saveNotificationSettings).not.toHaveBeenCalled()

    notificationSettings.mockResolvedValueOnce({ language: 'zh-CN', digest_hour: 8, timezone: 'Asia/Shanghai', events: {}, templates: {} })
    await w.find('[data-test=retry]').trigger('click')
    await flushPromises()
    expect(w.find('[data-test=load-error]').exists()).toBe(false)
    expect(w.find('[data-test=settings-language]').exists()).toBe(true)
    expect(w.find('[data-test=save-notification-settings]').attributes('disabled')).toBeUndefined()
  })
})
