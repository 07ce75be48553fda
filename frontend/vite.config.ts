/// <reference types="vitest/config" />
import { defineConfig, type Plugin } from 'vite'
import vue from '@vitejs/plugin-vue'
import Components from 'unplugin-vue-components/vite'
import { ElementPlusResolver } from 'unplugin-vue-components/resolvers'
import { VantResolver } from '@vant/auto-import-resolver'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib'

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

// The server sends a file's precompressed twin (<file>.br, <file>.gz) to a browser that accepts it (server/ops.go):
// both are written here, once, at the highest levels, for every text file worth compressing.
function precompress(): Plugin {
  const compressible = /\.(js|mjs|css|html|svg|json|txt|map|webmanifest)$/
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]))
  return {
    name: 'halley-precompress',
    apply: 'build',
    closeBundle() {
      for (const file of walk(outDir)) {
        if (!compressible.test(file) || file.includes(`${outDir}/.vite/`) || statSync(file).size < 1024) continue
        const data = readFileSync(file)
        const br = brotliCompressSync(data, {
          params: { [zlib.BROTLI_PARAM_QUALITY]: zlib.BROTLI_MAX_QUALITY, [zlib.BROTLI_PARAM_SIZE_HINT]: data.length },
        })
        const gz = gzipSync(data, { level: 9 })
        // A twin that saves nothing is not worth a Vary header.
        if (br.length < data.length) writeFileSync(`${file}.br`, br)
        if (gz.length < data.length) writeFileSync(`${file}.gz`, gz)
      }
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
    precompress(),
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
    // dist/.vite/manifest.json: which chunks each page loads, for the weight budget (scripts/budget.mjs).
    manifest: true,
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
    // Page tests mount components that import Element Plus's and Vant's styles: vite handles those, not Node.
    server: { deps: { inline: ['element-plus', 'vant'] } },
  },
})
