/// <reference types="vitest/config" />
import { defineConfig, type Plugin } from 'vite'
import vue from '@vitejs/plugin-vue'
import Components from 'unplugin-vue-components/vite'
import { ElementPlusResolver } from 'unplugin-vue-components/resolvers'
import { VantResolver } from '@vant/auto-import-resolver'
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

const outDir = resolve(import.meta.dirname, 'dist')

// dist/.gitkeep belongs to the repository (frontend/embed.go needs dist/ to exist before the first build), so the
// build never empties dist wholesale: it removes everything else itself and puts the placeholder back.
function keepGitkeep(): Plugin {
  return {
    name: 'halley-keep-gitkeep',
    apply: 'build',
    buildStart() {
      if (!existsSync(outDir)) return
      for (const entry of readdirSync(outDir)) {
        if (entry !== '.gitkeep') rmSync(join(outDir, entry), { recursive: true, force: true })
      }
    },
    closeBundle() {
      const keep = join(outDir, '.gitkeep')
      if (!existsSync(keep)) writeFileSync(keep, '')
    },
  }
}

// Vant's icon font lists a CDN copy (at.alicdn.com) after its inline one. The app's Content-Security-Policy allows
// fonts from Halley itself and data: URLs only (and a phone need not tell a CDN it opened a task): the CDN source
// is dropped, so the browser never tries it.
function noRemoteFonts(): Plugin {
  return {
    name: 'halley-no-remote-fonts',
    enforce: 'pre',
    transform(code, id) {
      if (!id.includes('/vant/') || !id.endsWith('.css') || !code.includes('alicdn.com')) return null
      return { code: code.replace(/,\s*url\(\s*["']?(?:https?:)?\/\/at\.alicdn\.com\/[^)]*\)\s*format\(["'][a-z0-9]+["']\)/g, ''), map: null }
    },
  }
}

export default defineConfig({
  plugins: [
    vue(),
    // Element Plus (desktop) and Vant (phone) components are imported on use, with their styles, so each route
    // chunk carries only what it renders.
    Components({
      resolvers: [ElementPlusResolver(), VantResolver()],
      dts: 'src/components.d.ts',
    }),
    keepGitkeep(),
    noRemoteFonts(),
  ],
  resolve: {
    alias: { '@': resolve(import.meta.dirname, 'src') },
  },
  server: {
    proxy: {
      '/api': { target: 'http://127.0.0.1:8080', changeOrigin: false },
      '/healthz': 'http://127.0.0.1:8080',
      '/readyz': 'http://127.0.0.1:8080',
    },
  },
  build: {
    outDir,
    emptyOutDir: false,
    // The API reference page (/api/docs) is one chunk of 1.5 MB: Swagger UI, loaded by that page only.
    chunkSizeWarningLimit: 1600,
    rollupOptions: {
      // The app, and the API reference page (/api/docs) with its bundled renderer.
      input: { main: resolve(import.meta.dirname, 'index.html'), 'api-docs': resolve(import.meta.dirname, 'api-docs.html') },
    },
  },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
})
