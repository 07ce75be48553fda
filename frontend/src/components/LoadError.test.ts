// The error state of the pages (LoadError.vue), rendered in both languages: what failed, the server's message, and
// a retry button that calls the page's load.
import { describe, expect, it } from 'vitest'
import { createSSRApp, h } from 'vue'
import { renderToString } from 'vue/server-renderer'
import { createI18n } from 'vue-i18n'
import en from '@/i18n/en'
import zhCN from '@/i18n/zh-CN'
import LoadError from './LoadError.vue'

function i18nIn(locale: string) {
  return createI18n({ legacy: false, locale, fallbackLocale: 'en', messages: { en, 'zh-CN': zhCN } })
}

async function render(locale: string, message: string, onRetry?: () => void) {
  const app = createSSRApp({ render: () => h(LoadError, { message, onRetry }) })
  app.use(i18nIn(locale))
  return renderToString(app)
}

describe('LoadError', () => {
  it('says what failed and offers to try again, in English', async () => {
    const html = await render('en', 'network down')
    expect(html).toContain('role="alert"')
    expect(html).toContain(en.common.loadFailed)
    expect(html).toContain('network down')
    expect(html).toMatch(/<button[^>]*data-test="retry"[^>]*>Try again<\/button>/)
  })

  it('speaks Chinese to a Chinese user', async () => {
    const html = await render('zh-CN', '服务器无响应')
    expect(html).toContain(zhCN.common.loadFailed)
    expect(html).toContain('服务器无响应')
    expect(html).toContain('>重试</button>')
    expect(html).not.toMatch(/Try again|could not/)
  })

  it('escapes the message (server text is not markup)', async () => {
    const html = await render('en', '<img src=x onerror=alert(1)>')
    expect(html).not.toContain('<img')
    expect(html).toContain('&lt;img')
  })

})
