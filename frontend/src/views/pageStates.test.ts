// @vitest-environment happy-dom
// The loading, empty and error states of the pages (issue 32), mounted in both languages with the API mocked:
// while the data loads the page says so; a failed load shows what failed and a retry that loads again; an empty list
// says why it is empty and what to do, never under a load error.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { createI18n } from 'vue-i18n'
import en from '@/i18n/en'
import zhCN from '@/i18n/zh-CN'
import { ApiError } from '@/api/client'

const cc = vi.fn()
const templates = vi.fn()
vi.mock('@/api', () => ({ api: { cc: (...a: unknown[]) => cc(...a), templates: (...a: unknown[]) => templates(...a), ccRead: () => Promise.resolve() } }))

const CcView = (await import('./CcView.vue')).default
const StartListView = (await import('./StartListView.vue')).default

function mountIn(locale: 'en' | 'zh-CN', component: unknown) {
  const i18n = createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN }, missingWarn: false, fallbackWarn: false })
  return mount(component as never, { global: { plugins: [i18n], stubs: { RouterLink: RouterLinkStub, LinearDialog: true } } })
}

function deferred<T>() {
  let resolve!: (v: T) => void
  let reject!: (e: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

beforeEach(() => {
  cc.mockReset()
  templates.mockReset()
})
afterEach(() => {
  document.body.innerHTML = ''
})

describe.each([
  ['en', en],
  ['zh-CN', zhCN],
] as const)('pages in %s', (locale, msgs) => {
  it('the CC page: loading, then an error with a retry that loads again, then the empty sentence', async () => {
    const first = deferred<never>()
    cc.mockReturnValueOnce(first.promise)
    const w = mountIn(locale, CcView)
    await flushPromises()
    expect(w.find('.el-loading-mask').exists()).toBe(true) // loading
    first.reject(new ApiError(503, 'unavailable', 'the database is not reachable'))
    await flushPromises()
    const err = w.find('[data-test=load-error]')
    expect(err.exists()).toBe(true)
    expect(err.text()).toContain(msgs.common.loadFailed)
    expect(err.text()).toContain('the database is not reachable')
    expect(w.text()).not.toContain(msgs.cc.empty) // no "nobody copied you" under a failure

    cc.mockResolvedValueOnce({ items: [] })
    await w.find('[data-test=retry]').trigger('click')
    await flushPromises()
    expect(cc).toHaveBeenCalledTimes(2)
    expect(w.find('[data-test=load-error]').exists()).toBe(false)
    expect(w.text()).toContain(msgs.cc.empty)
    w.unmount()
  })

  it('the start page: an error with a retry, then the processes; an empty list says what to do', async () => {
    templates.mockRejectedValueOnce(new ApiError(500, 'internal', 'boom'))
    const w = mountIn(locale, StartListView)
    await flushPromises()
    expect(w.find('[data-test=load-error]').text()).toContain('boom')
    expect(w.text()).not.toContain(msgs.start.empty)

    templates.mockResolvedValueOnce([{ key: 'leave', name: 'Leave', latest_version: 1, start_kind: 'manual', description: 'days off' }])
    await w.find('[data-test=retry]').trigger('click')
    await flushPromises()
    expect(w.find('[data-test=load-error]').exists()).toBe(false)
    expect(w.find('[data-template=leave]').exists()).toBe(true)
    w.unmount()

    templates.mockResolvedValueOnce([])
    const empty = mountIn(locale, StartListView)
    await flushPromises()
    expect(empty.text()).toContain(msgs.start.empty)
    expect(empty.text()).toContain(msgs.start.askAdmin)
    empty.unmount()
  })
})
