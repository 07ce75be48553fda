// Weight budget of the built app (issue 32, "Weight"): the JavaScript a browser downloads to show a page, counted
// compressed as the server sends it (the brotli twin the build wrote, else the file). A page loads the entry
// chunk, its route's chunk and everything they import statically (the manifest's `imports`, transitively);
// dynamic imports (Mermaid, other pages) load later, only where used, and are not counted.
// Run after `vite build`: `node scripts/budget.mjs` prints the figures and fails when a page is over budget.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { brotliCompressSync } from 'node:zlib'

const dist = resolve(import.meta.dirname, '..', 'dist')
const KiB = 1024

/** The pages measured: their route component (a key of the manifest) and their budget in KiB of compressed JS. */
export const budgets = [
  { page: 'login', source: 'src/views/LoginView.vue', budget: 150 },
  { page: 'inbox', source: 'src/views/InboxView.vue', budget: 400 },
  { page: 'task', source: 'src/views/TaskView.vue', budget: 400 },
  { page: 'phone task', source: 'src/views/h5/H5Task.vue', budget: 400 },
  { page: 'designer', source: 'src/views/admin/designer/DesignerView.vue', budget: 400 },
]

function compressedSize(file) {
  const path = join(dist, file)
  if (existsSync(`${path}.br`)) return statSync(`${path}.br`).size
  return brotliCompressSync(readFileSync(path)).length
}

/** The JS files a page loads before it shows: entry + route chunk + their static imports. */
export function pageFiles(manifest, source) {
  // The app's entry (index.html); the build has others, such as the API reference page (api-docs.html).
  const entry = manifest['index.html']?.isEntry ? 'index.html' : Object.keys(manifest).find((k) => manifest[k].isEntry)
  if (!manifest[source]) throw new Error(`${source} is not in the build's manifest`)
  const seen = new Set()
  const visit = (key) => {
    if (seen.has(key)) return
    seen.add(key)
    for (const dep of manifest[key].imports ?? []) visit(dep)
  }
  visit(entry)
  visit(source)
  return [...seen].map((k) => manifest[k].file).filter((f) => f.endsWith('.js'))
}

export function measure() {
  const manifest = JSON.parse(readFileSync(join(dist, '.vite', 'manifest.json'), 'utf8'))
  return budgets.map((b) => {
    const files = pageFiles(manifest, b.source)
    const bytes = files.reduce((n, f) => n + compressedSize(f), 0)
    const raw = files.reduce((n, f) => n + statSync(join(dist, f)).size, 0)
    const mermaid = files.some((f) => /^assets\/(mermaid\.core|cytoscape|katex|dagre)/.test(f))
    return { ...b, files: files.length, kib: bytes / KiB, rawKib: raw / KiB, mermaid }
  })
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let over = false
  console.log('page        files  JS (raw KiB)  JS (brotli KiB)  budget KiB')
  for (const r of measure()) {
    const bad = r.kib > r.budget || r.mermaid
    over ||= bad
    console.log(
      `${r.page.padEnd(12)}${String(r.files).padStart(5)}  ${r.rawKib.toFixed(0).padStart(12)}  ${r.kib.toFixed(1).padStart(15)}  ${String(r.budget).padStart(10)}${bad ? '  OVER' : ''}${r.mermaid ? ' (loads Mermaid)' : ''}`,
    )
  }
  if (over) {
    console.error('weight budget exceeded (docs/ui.md, "Weight")')
    process.exit(1)
  }
}
