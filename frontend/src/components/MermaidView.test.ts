// @vitest-environment happy-dom
// The diagram of the task and request pages (desktop and H5) is asked for in the reader's language — the server
// then names the nodes and says the conditions in it — and asked for again when the language changes.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { flushPromises, mount } from '@vue/test-utils'
import { createI18n } from 'vue-i18n'
import en from '@/i18n/en'
import zhCN from '@/i18n/zh-CN'

const rendered: string[] = []
vi.mock('@/lib/diagram', async (orig) => ({
  ...(await orig<typeof import('@/lib/diagram')>()),
  renderMermaid: async (src: string) => {
    rendered.push(src)
    return `<svg data-src="${encodeURIComponent(src)}"></svg>`
  },
}))

const MermaidView = (await import('./MermaidView.vue')).default

afterEach(() => {
  rendered.length = 0
  document.body.innerHTML = ''
})

function mountIn(locale: string, load: (lang: string) => Promise<string>) {
  const i18n = createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN }, missingWarn: false, fallbackWarn: false })
  return { i18n, w: mount(MermaidView, { props: { load }, global: { plugins: [i18n] } }) }
}

describe('MermaidView', () => {
  it('loads the diagram in the reader\'s language and again in the new one when it changes', async () => {
    const load = vi.fn(async (lang: string) => `flowchart TD\n  n0["${lang === 'zh-CN' ? '直属上级审批' : 'Team lead'}"]\n  n0 -->|"default"| n1\n`)
    const { i18n, w } = mountIn('zh-CN', load)
    await flushPromises()
    expect(load).toHaveBeenCalledTimes(1)
    expect(load).toHaveBeenLastCalledWith('zh-CN')
    expect(rendered.at(-1)).toContain('直属上级审批')
    expect(rendered.at(-1)).toContain('|"默认"|') // a word an older server writes in English
    expect(w.find('[data-test="diagram"]').text()).toContain(zhCN.diagram.state.completed)

    i18n.global.locale.value = 'en'
    await flushPromises()
    expect(load).toHaveBeenCalledTimes(2)
    expect(load).toHaveBeenLastCalledWith('en')
    expect(rendered.at(-1)).toContain('Team lead')
    expect(rendered.at(-1)).toContain('|"default"|')
  })

  it('asks in English for a language Halley does not speak', async () => {
    const load = vi.fn(async () => 'flowchart TD\n  n0["x"]\n')
    mountIn('fr', load)
    await flushPromises()
    expect(load).toHaveBeenLastCalledWith('en')
  })

  it('shows why a diagram failed to load', async () => {
    const { w } = mountIn('en', () => Promise.reject(new Error('boom')))
    await flushPromises()
    expect(w.find('[role="alert"]').text()).toContain('boom')
  })
})
