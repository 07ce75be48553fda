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
    chunkSizeWarningLimit: 1200,
  },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
})
