// End-to-end test of the UI against a real Halley (issue 7): an admin builds a two-approver template in the designer
// by dragging nodes and connecting them, sets a condition on an edge and tests it, publishes; a user starts it from
// its form; the approvers approve on a 390×844 phone viewport; the request shows completed with a green diagram.
// Then (issue 16) a plugin run that never started shows its error, the admin edits, disables and resets users, the
// reset user must choose a new password, switches the UI to 中文 and back, and a phone user saves their profile.
// Then (issue 18) the attacks on the approver's browser: a javascript: URL submitted through a form is refused, one
// stored in a request runs nothing when the approver opens and clicks it, injected markup is stopped by the
// Content-Security-Policy, an HTML form template still runs in its sandbox, and the whole run logs no violation.
// Then (issue 20) an API token is created with an expiry, shown once and deleted, a user is deleted, and the audit
// log shows a change with its before/after. Then (issue 28) the API reference page renders the OpenAPI document.
// Then (issue 25) an out-of-office delegation: the delegate's inbox marks the task on behalf of the delegator and,
// once the initiator urged it, as urged (desktop and phone); the delegator removes the delegation on their profile.
// Then (the languages) a Chinese user, approver and admin walk the main pages, desktop and phone, and read no
// English on them but data: no message key, no English label, the diagram's edge labels in Chinese. Last, the whole
// run logged no Content-Security-Policy violation.
//
//   HALLEY_BIN=../halley npm run test:e2e      # the binary built from ./server/cmd/halley (it embeds dist/)
//   HALLEY_E2E_MOCK=1 npm run test:e2e        # rehearse against e2e/mock-server.mjs (never in CI)
//
// It drives Debian's Chromium (/usr/bin/chromium) through playwright-core: no browser is downloaded. Screenshots
// of every step go to e2e/artifacts/. The last line is "N passed, M failed".
import { spawn } from 'node:child_process'
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer as createHTTPServer } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const artifacts = join(here, 'artifacts')
const CHROMIUM = process.env.HALLEY_E2E_CHROMIUM || '/usr/bin/chromium'
const CI = process.env.CI === 'true'
const MOCK = process.env.HALLEY_E2E_MOCK === '1'
const ADMIN_PASSWORD = 'e2e-admin-secret'
const STEP_TIMEOUT = Number(process.env.HALLEY_E2E_TIMEOUT || 20000)

if (!existsSync(CHROMIUM)) {
  if (CI) {
    console.error(`e2e: ${CHROMIUM} is missing (install Debian's chromium: apt-get install -y chromium)`)
    console.log('0 passed, 1 failed')
    process.exit(1)
  }
  console.log(`e2e: skipped, ${CHROMIUM} is not installed (apt-get install -y chromium)`)
  process.exit(0)
}
const BIN = process.env.HALLEY_BIN ? resolve(process.env.HALLEY_BIN) : ''
if (!MOCK && (!BIN || !existsSync(BIN))) {
  console.error(`e2e: set HALLEY_BIN to the halley binary (got ${JSON.stringify(process.env.HALLEY_BIN ?? '')})`)
  console.log('0 passed, 1 failed')
  process.exit(1)
}
if (MOCK && CI) {
  console.error('e2e: HALLEY_E2E_MOCK is for local rehearsal only, not CI')
  process.exit(1)
}

const { chromium } = await import('playwright-core')
const { peopleWalk } = await import('./people.mjs')

rmSync(artifacts, { recursive: true, force: true })
mkdirSync(artifacts, { recursive: true })
const dataDir = mkdtempSync(join(tmpdir(), 'halley-e2e-data-'))
const profileDir = mkdtempSync(join(tmpdir(), 'halley-e2e-chromium-'))

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer()
    s.once('error', rej)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => res(port))
    })
  })
}

// ---- the server ----
const port = await freePort()
const base = `http://127.0.0.1:${port}`
const serverLog = createWriteStream(join(artifacts, 'halley.log'))
const env = {
  ...process.env,
  HALLEY_ADDR: `127.0.0.1:${port}`,
  HALLEY_DATA_DIR: dataDir,
  HALLEY_ADMIN_PASSWORD: ADMIN_PASSWORD,
  HALLEY_LOG_LEVEL: process.env.HALLEY_LOG_LEVEL || 'info',
  HALLEY_OUTBOUND_ALLOW: '127.0.0.1', // the notification channel of the test posts to a receiver on loopback
}
delete env.HALLEY_DATABASE_URL // embedded SQLite, a temp directory
delete env.HALLEY_REDIS_URL // in-process scheduler
delete env.HALLEY_CONFIG
const server = MOCK
  ? spawn(process.execPath, [join(here, 'mock-server.mjs')], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  : spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
server.stdout.pipe(serverLog)
server.stderr.pipe(serverLog)
let serverExited = null
server.on('exit', (code, signal) => (serverExited = { code, signal }))

let browser
let finished = false
async function cleanup() {
  if (finished) return
  finished = true
  try {
    await browser?.close()
  } catch {
    /* already gone */
  }
  // The server runs in its own process group: end it and anything it started (plugin processes).
  try {
    if (serverExited === null) process.kill(-server.pid, 'SIGTERM')
  } catch {
    /* already gone */
  }
  await new Promise((r) => {
    if (serverExited !== null) return r()
    const t = setTimeout(() => {
      try {
        process.kill(-server.pid, 'SIGKILL')
      } catch {
        /* gone */
      }
      r()
    }, 5000)
    server.once('exit', () => {
      clearTimeout(t)
      r()
    })
  })
  rmSync(dataDir, { recursive: true, force: true })
  rmSync(profileDir, { recursive: true, force: true })
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await cleanup()
    process.exit(130)
  })
}

async function waitReady() {
  const deadline = Date.now() + 60000
  while (Date.now() < deadline) {
    if (serverExited) throw new Error(`halley exited before it was ready (${JSON.stringify(serverExited)}); see e2e/artifacts/halley.log`)
    try {
      const r = await fetch(`${base}/readyz`)
      if (r.status === 200) return
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error('halley did not answer GET /readyz = 200 within 60 s')
}

// ---- API helpers (seeding goes through the public API) ----
// raw calls the API and returns the status and the JSON body (the text when it is not JSON), whatever the status.
async function raw(method, path, token, body) {
  const r = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await r.text()
  let json
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {
    json = text
  }
  return { status: r.status, ok: r.ok, json, text }
}

// call calls the API and returns the JSON body; a status other than 2xx fails the step.
async function call(method, path, token, body) {
  const r = await raw(method, path, token, body)
  if (!r.ok) throw new Error(`${method} ${path} → ${r.status} ${r.text.slice(0, 300)}`)
  return r.json
}

// ---- steps ----
const results = []
let stepNo = 0
let page
// HALLEY_E2E_ONLY=text (local rehearsal, never in CI): run only the steps whose name holds text, and the start;
// texts joined by | pick several steps (a later step usually needs the earlier ones it names).
const ONLY = CI ? [] : (process.env.HALLEY_E2E_ONLY || '').split('|').filter(Boolean)
const ALWAYS = ['halley starts and is ready', 'seed users through the API']
async function step(name, fn) {
  if (ONLY.length && !ONLY.some((o) => name.includes(o)) && !ALWAYS.includes(name)) return
  stepNo++
  const label = `${String(stepNo).padStart(2, '0')}-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`
  const t0 = Date.now()
  try {
    await fn()
    results.push({ name, ok: true })
    console.log(`ok   ${stepNo} ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    results.push({ name, ok: false, error: e })
    console.log(`FAIL ${stepNo} ${name}: ${e?.message ?? e}`)
  } finally {
    if (page && !page.isClosed()) await page.screenshot({ path: join(artifacts, `${label}.png`), fullPage: true }).catch(() => {})
  }
  if (!results.at(-1).ok) throw new StopError()
}
class StopError extends Error {}

// Element Plus puts attributes of <el-input> on the native input, other components on their root: accept both.
function field(scope, name) {
  return scope.locator(`input[data-test=${name}], textarea[data-test=${name}], [data-test=${name}] input, [data-test=${name}] textarea`).first()
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg)
}

async function login(username, password, { viewport = { width: 1440, height: 900 } } = {}) {
  await page.setViewportSize(viewport)
  await page.goto(`${base}/login`)
  // A fresh sign-in: the previous user's token is dropped by signing in again.
  await page.fill('input[name=username]', username)
  await page.fill('input[name=password]', password)
  await page.click('[data-test=login-submit]')
  await page.waitForURL((u) => !u.pathname.startsWith('/login'))
}

async function pickOption(text) {
  const item = page.locator('.el-select-dropdown__item:visible', { hasText: text }).first()
  await item.waitFor()
  await item.click()
}

async function center(locator) {
  const b = await locator.boundingBox()
  if (!b) throw new Error('element has no box')
  return { x: b.x + b.width / 2, y: b.y + b.height / 2 }
}

// canvasStill waits until the canvas' viewport has kept one transform for a few frames: switching to the canvas
// fits the view after a moment, and a drop or a drag during that move lands somewhere else in flow coordinates.
// Vue Flow sets the transform on its transformation pane (the viewport element around it has none: watching that
// one waited for nothing, and a drag now and then went to the pane while the view was still being fitted).
async function canvasStill() {
  await page.waitForFunction(() => {
    const v = document.querySelector('.vue-flow__transformationpane')
    if (!v || !v.style.transform) return false
    const t = v.style.transform
    const w = window
    if (w.__lastTransform !== t) {
      w.__lastTransform = t
      w.__sameSince = performance.now()
      return false
    }
    return performance.now() - w.__sameSince > 250
  }, null, { polling: 50 })
}

// dropFromPalette drags a palette item onto the canvas at a point of it and waits for the node it makes. Once in a
// CI run (2026-12-04; 0 in 40 runs here, loaded or not) the second of two drops made no node. The likely cause, not
// proven: Playwright starts an HTML5 drag in Chromium by intercepting it on a mouse move, and a drag it does not see
// never drops.
// A person would drag again, and so does this, at most three times, and only while the canvas still has as many
// nodes as before (a drop that made a node under another id, or two, still fails the step).
async function dropFromPalette(type, id, at) {
  const nodes = page.locator('.vue-flow__node')
  const before = await nodes.count()
  for (let attempt = 1; ; attempt++) {
    await page.dragAndDrop(`[data-test=palette-${type}]`, '[data-test=canvas]', { targetPosition: at })
    try {
      await page.locator(`.vue-flow__node[data-id="${id}"]`).waitFor({ timeout: 5000 })
      if (attempt > 1) console.log(`     (the drop of ${id} took ${attempt} drags)`)
      break
    } catch (e) {
      if (attempt === 3 || (await nodes.count()) !== before) throw e
    }
  }
  expect((await nodes.count()) === before + 1, `one drop of ${type} made ${(await nodes.count()) - before} nodes`)
}

// grabPoint is a point of the node that no other node covers, for a drag to take that node.
async function grabPoint(id) {
  const p = await page.evaluate((id) => {
    const n = document.querySelector(`.vue-flow__node[data-id="${id}"]`)
    const b = n.getBoundingClientRect()
    for (const fy of [0.5, 0.3, 0.7, 0.15, 0.85])
      for (const fx of [0.5, 0.3, 0.7]) {
        const x = b.x + b.width * fx
        const y = b.y + b.height * fy
        const hit = document.elementFromPoint(x, y)
        if (hit && n.contains(hit) && !hit.closest('.vue-flow__handle')) return { x, y }
      }
    return null
  }, id)
  if (!p) throw new Error(`node ${id} is covered everywhere`)
  return p
}

async function connect(from, to) {
  const src = page.locator(`.vue-flow__node[data-id="${from}"] .vue-flow__handle.source`)
  const dst = page.locator(`.vue-flow__node[data-id="${to}"] .vue-flow__handle.target`)
  const a = await center(src)
  const b = await center(dst)
  await page.mouse.move(a.x, a.y)
  await page.mouse.down()
  await page.mouse.move((a.x + b.x) / 2, (a.y + b.y) / 2, { steps: 8 })
  await page.mouse.move(b.x, b.y, { steps: 8 })
  await page.mouse.up()
  await page.locator(`.vue-flow__edge[data-id*="${from}->${to}"]`).first().waitFor({ state: 'attached' })
}

async function clickEdge(from, to) {
  // The wide invisible interaction path of the edge takes the click.
  const edge = page.locator(`.vue-flow__edge[data-id*="${from}->${to}"]`).first()
  const path = edge.locator('path.vue-flow__edge-interaction, path.vue-flow__edge-path').first()
  const box = await path.boundingBox()
  if (!box) throw new Error(`edge ${from}→${to} is not drawn`)
  // Click the middle of the path's length, which lies on the line.
  const pt = await path.evaluate((p) => {
    const l = p.getTotalLength()
    const m = p.getPointAtLength(l / 2)
    const ctm = p.getScreenCTM()
    return { x: m.x * ctm.a + m.y * ctm.c + ctm.e, y: m.x * ctm.b + m.y * ctm.d + ctm.f }
  })
  // A click can land while the canvas is still re-rendering after the previous edit (slow, loaded machines):
  // try a few times before giving up.
  for (let attempt = 1; ; attempt++) {
    await page.mouse.click(pt.x, pt.y)
    try {
      await page.locator('[data-test=edge-panel]').waitFor({ timeout: 5000 })
      return
    } catch (err) {
      if (attempt >= 4) throw err
      await page.keyboard.press('Escape')
    }
  }
}

async function typeJson(container, text) {
  // the JSON editors wrap their textarea; an el-input passes its data-test to the textarea itself
  await page.locator(`${container} textarea, textarea${container}`).first().fill(text)
}

async function noHorizontalScroll() {
  const { sw, cw } = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth }))
  expect(sw <= cw, `the page scrolls horizontally: scrollWidth ${sw} > clientWidth ${cw}`)
}

// axeCheck runs axe-core's WCAG 2.1 A/AA rules on the page as it stands and returns its serious and critical
// violations, each a line naming where. axe is evaluated through the DevTools protocol, which the page's
// Content-Security-Policy does not govern: no script is added to the page.
let axeSource
async function axeCheck(where) {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
  await page.waitForLoadState('networkidle')
  // Element Plus fades colours in 0.3 s (a radio button just clicked): axe measures the contrast once they are set.
  await page.waitForTimeout(350)
  await page.evaluate(axeSource)
  const r = await page.evaluate(() => window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }))
  const w = page.viewportSize()?.width
  return r.violations
    .filter((x) => x.impact === 'serious' || x.impact === 'critical')
    .map((v) => `${where} ${w}px: ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`)
}

const key = `leave-e2e-${Date.now().toString(36)}`
let adminToken
let instanceId
const cspViolations = []
let expectViolations = false
const dialogs = []

async function publishTemplate(token, tkey, definition) {
  await call('POST', '/templates', token, { key: tkey, name: tkey, definition })
  await call('POST', `/templates/${tkey}/publish`, token)
}

try {
  await step('halley starts and is ready', async () => {
    await waitReady()
  })

  await step('seed users through the API', async () => {
    adminToken = (await call('POST', '/auth/login', undefined, { username: 'admin', password: ADMIN_PASSWORD })).token
    expect(adminToken, 'no token from POST /auth/login')
    for (const u of [
      { username: 'alice', password: 'alice-pw-123', display_name: 'Alice Applicant', roles: [], department: 'Sales', manager: 'bob' },
      { username: 'bob', password: 'bob-pw-123', display_name: 'Bob Lead', roles: ['lead'], department: 'Sales' },
      { username: 'carol', password: 'carol-pw-123', display_name: 'Carol Manager', roles: ['manager'], department: 'Sales' },
    ]) {
      await call('POST', '/users', adminToken, { ...u, password_change_required: false })
    }
    const list = await call('GET', '/users', adminToken)
    const names = (list.items ?? list).map((u) => u.username)
    expect(['alice', 'bob', 'carol'].every((n) => names.includes(n)), `GET /users lacks the new users: ${names}`)
  })

  browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
    viewport: { width: 1440, height: 900 },
    acceptDownloads: false,
  })
  browser.setDefaultTimeout(STEP_TIMEOUT)
  page = browser.pages()[0] ?? (await browser.newPage())
  const consoleLog = createWriteStream(join(artifacts, 'browser-console.log'))
  page.on('console', (m) => {
    consoleLog.write(`[${m.type()}] ${m.text()}\n`)
    // Chromium reports every Content-Security-Policy violation on the console; the app must cause none.
    if (/Content Security Policy/i.test(m.text())) cspViolations.push({ text: m.text(), expected: expectViolations })
  })
  page.on('pageerror', (e) => consoleLog.write(`[pageerror] ${e.message}\n`))
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    d.dismiss().catch(() => {})
  })

  await step('admin signs in and sees the header', async () => {
    await page.goto(`${base}/`)
    await page.waitForURL(/\/login/)
    await login('admin', ADMIN_PASSWORD)
    await page.locator('[data-test=current-user]').getByText('admin').first().waitFor()
  })

  await step('admin sees the plugin sandbox and uploads a network-off plugin', async () => {
    await page.goto(`${base}/admin/plugins`)
    const summary = page.locator('[data-test=sandbox-summary]')
    await summary.waitFor()
    expect(/\d+ of \d+ protections in force/.test(await summary.innerText()), `sandbox summary: ${await summary.innerText()}`)
    await page.click('[data-test=sandbox-toggle]')
    await page.locator('[data-test=sandbox-table]').getByText('network_off').waitFor()
    await page.click('[data-test=upload-plugin]')
    await page.setInputFiles('[data-test=plugin-file]', { name: 'offline-calc.py', mimeType: 'text/x-python', buffer: Buffer.from('print("{}")\n') })
    expect((await field(page, 'plugin-name').inputValue()) === 'offline-calc', 'the name is not taken from the file name')
    await page.locator('[data-test=plugin-network]').getByText('off').click()
    await page.click('[data-test=plugin-submit]')
    await page.locator('.el-table__row', { hasText: 'offline-calc' }).locator('.el-tag', { hasText: 'off' }).waitFor()
    const p = await call('GET', '/plugins/offline-calc', adminToken)
    expect(p.network === 'off', `GET /plugins/offline-calc network = ${p.network}`)
    const sb = await call('GET', '/plugins/sandbox', adminToken)
    const names = Array.isArray(sb.protections) ? sb.protections.map((x) => x.name) : []
    expect(names.length === 10 && names.includes('private_tmp') && names.includes('no_unix_sockets'), `sandbox report: ${JSON.stringify(sb).slice(0, 300)}`)
  })

  await step('admin creates a template', async () => {
    await page.goto(`${base}/admin/templates`)
    await page.click('[data-test=new-template]')
    await field(page, 'template-key').fill(key)
    await field(page, 'template-name').fill('Leave request (e2e)')
    await page.click('[data-test=create-template]')
    await page.waitForURL(new RegExp(`/admin/templates/${key}/designer`))
    await page.locator('.vue-flow__node[data-id="start"]').waitFor()
    await page.locator('.vue-flow__node[data-id="end"]').waitFor()
  })

  await step('drag two approval nodes from the palette onto the canvas', async () => {
    // the designer opens on the business view; the palette and free drawing are the canvas'
    await page.click('[data-test=mode-canvas]')
    await canvasStill()
    const canvas = page.locator('[data-test=canvas]')
    const box = await canvas.boundingBox()
    await dropFromPalette('approval', 'approval', { x: box.width * 0.3, y: box.height * 0.45 })
    await dropFromPalette('approval', 'approval_2', { x: box.width * 0.7, y: box.height * 0.6 })
    expect((await page.locator('.vue-flow__node').count()) === 4, 'expected 4 nodes on the canvas')
  })

  await step('move a node by dragging it', async () => {
    await canvasStill()
    const node = page.locator('.vue-flow__node[data-id="end"]')
    const before = await node.boundingBox()
    // Now and then (about 1 run in 10 here, with or without a click or single moves first) Chromium's first press
    // after the palette's HTML5 drops does not start a drag: the node is neither selected nor moved, the designer's
    // selection is cleared as by a click on the pane. The cause is not found; a person would press again, and so
    // does this step, at most three times — a drag that starts and does not move the node still fails it.
    let dragging = false
    let attempt = 0
    for (; attempt < 3 && !dragging; attempt++) {
      await canvasStill()
      const c = await grabPoint('end')
      await page.mouse.move(c.x, c.y)
      await page.mouse.down()
      for (let i = 1; i <= 5 && !dragging; i++) {
        await page.mouse.move(c.x + 2 * i, c.y + 4 * i)
        dragging = await node.evaluate((n) => n.classList.contains('dragging'))
      }
      if (dragging) await page.mouse.move(c.x + 40, c.y + 90, { steps: 5 })
      await page.mouse.up()
    }
    expect(dragging, 'three presses on the end node did not start a drag')
    if (attempt > 1) console.log(`     (the drag took ${attempt} presses)`)
    const after = await node.boundingBox()
    expect(Math.abs(after.y - before.y) > 30, `the end node did not move (${before.y} → ${after.y})`)
  })

  await step('delete the start → end edge', async () => {
    await clickEdge('start', 'end')
    await page.click('[data-test=delete-edge]')
    await page.waitForFunction(() => !document.querySelector('.vue-flow__edge[data-id*="start->end"]'))
  })

  await step('connect start → approval → approval_2 → end', async () => {
    await connect('start', 'approval')
    await connect('approval', 'approval_2')
    await connect('approval_2', 'end')
    expect((await page.locator('.vue-flow__edge').count()) === 3, 'expected 3 edges')
  })

  await step('the join picker explains all chosen / first / at least N', async () => {
    await page.click('.vue-flow__node[data-id="end"] .name')
    const picker = page.locator('[data-test=node-join]')
    await picker.waitFor()
    const helps = await picker.locator('.join-help').allInnerTexts()
    expect(helps.length === 3 && helps.every((h) => h.trim().length > 20), `join help texts: ${JSON.stringify(helps)}`)
    await page.click('[data-test=join-min]')
    await page.locator('[data-test=join-min-n]').waitFor()
    await page.locator('.vue-flow__node[data-id="end"] [data-test=join-badge]').waitFor()
    await page.click('[data-test=join-and]')
    await page.waitForFunction(() => !document.querySelector('.vue-flow__node[data-id="end"] [data-test=join-badge]'))
  })

  await step('live validation names the approvals without approvers', async () => {
    await page.locator('[data-test=validation-status][data-valid=false]').waitFor()
    await page.locator('.vue-flow__node[data-id="approval"] [data-invalid=true]').waitFor()
  })

  await step('configure the first approver (Team lead: bob)', async () => {
    await page.click('.vue-flow__node[data-id="approval"] .name')
    await page.locator('[data-test=node-panel]').waitFor()
    await field(page, 'node-name').fill('Team lead')
    await page.click('[data-test=approvers-users]')
    await page.keyboard.type('bob')
    await pickOption('bob')
    await page.keyboard.press('Escape')
    await page.locator('.vue-flow__node[data-id="approval"]').getByText('Team lead').waitFor()
  })

  await step('the node panel explains a field with the help text of the Go types (the definition schema)', async () => {
    await page.click('[data-test=node-panel] h3') // closes the user picker's list
    // The live validation (debounced) then drops the node's "needs approvers" alert, moving the fields up: wait
    // for it, or the pointer ends up beside the ⓘ and the tooltip closes.
    await page.locator('[data-test=node-panel] .el-alert').first().waitFor({ state: 'detached' })
    await page.hover('[data-test="help-Node-timeout"]')
    const tip = page.locator('.field-help-popper', { hasText: 'How long the node may take' })
    await tip.waitFor()
    // Live validation speaks the schema's language too: a timeout that is no duration is named with its field.
    await field(page, 'node-timeout').fill('soon')
    await page.locator('[data-test=node-panel] .el-alert', { hasText: 'timeout "soon" is not a duration' }).waitFor()
    await field(page, 'node-timeout').fill('')
    await page.locator('[data-test=node-panel] .el-alert', { hasText: 'is not a duration' }).waitFor({ state: 'detached' })
  })

  await step('configure the second approver (Manager: carol)', async () => {
    await page.click('.vue-flow__node[data-id="approval_2"] .name')
    await page.locator('[data-test=node-panel] h3', { hasText: 'Approval' }).waitFor()
    await field(page, 'node-name').fill('Manager')
    await page.click('[data-test=approvers-users]')
    await page.keyboard.type('carol')
    await pickOption('carol')
    await page.keyboard.press('Escape')
    await page.locator('.vue-flow__node[data-id="approval_2"]').getByText('Manager').waitFor()
  })

  await step('the start node can start on a message', async () => {
    await page.click('.vue-flow__node[data-id="start"] .name')
    await page.click('[data-test=trigger-kind]')
    await pickOption(/Message|消息/)
    await field(page, 'trigger-message').fill('order.paid')
    await page.locator('[data-test=trigger-message-help]').waitFor()
    await page.locator('.vue-flow__node[data-id="start"]').getByText('trigger: message').waitFor()
  })

  await step('make the start node a form with days and reason', async () => {
    await page.click('.vue-flow__node[data-id="start"] .name')
    await page.click('[data-test=trigger-kind]')
    await pickOption('Form')
    await page.click('[data-test=design-form]')
    const dlg = page.locator('.el-dialog:visible [data-test=form-designer]')
    await dlg.waitFor()
    await dlg.locator('[data-test=form-palette-number]').dragTo(dlg.locator('[data-test=form-canvas]'))
    await field(dlg, 'field-label').fill('Days')
    await field(dlg, 'field-path').fill('days')
    await dlg.locator('[data-test=field-required]').click()
    await dlg.locator('[data-test=form-palette-input]').click()
    await field(dlg, 'field-label').fill('Reason')
    await field(dlg, 'field-path').fill('reason')
    await dlg.getByText('form is consistent').waitFor()
    await page.click('[data-test=apply-form]')
    await page.locator('.vue-flow__node[data-id="start"]').getByText('trigger: form').waitFor()
  })

  await step('set a condition on start → Team lead and test it', async () => {
    await clickEdge('start', 'approval')
    // an invalid JSON is never taken: the designer says so instead of "valid"
    await page.click('[data-test=condition-to-json]')
    await typeJson('[data-test=edge-condition]', '{ "days": { "$gte": 1 ')
    await page.locator('[data-test=condition-json-error]').waitFor()
    await page.locator('[data-test=validation-status][data-valid=false]').waitFor()
    await typeJson('[data-test=edge-condition]', '{ "days": { "$gte": 1 } }')
    await page.click('[data-test=edge-sample-form] + button')
    await typeJson('[data-test=edge-sample]', '{ "days": 3 }')
    await page.click('[data-test=edge-test]')
    await page.locator('[data-test=condition-result][data-result=true]').waitFor()
    await typeJson('[data-test=edge-sample]', '{ "days": 0 }')
    await page.click('[data-test=edge-test]')
    await page.locator('[data-test=condition-result][data-result=false]').waitFor()
    // still in the JSON editor: the condition typed there is the edge's, drawn in words on the canvas
    await typeJson('[data-test=edge-condition]', '{ "days": { "$gte": 1 } }')
    await page.locator('.vue-flow__edge-text', { hasText: /≥ 1/ }).waitFor()
  })

  await step('the template validates, is saved and published', async () => {
    await page.locator('[data-test=validation-status][data-valid=true]').waitFor()
    await page.click('[data-test=save-draft]')
    await page.locator('.el-message--success', { hasText: 'Draft saved' }).waitFor()
    await page.click('[data-test=publish]')
    await page.locator('.el-message-box:visible').getByRole('button', { name: 'Yes' }).click()
    await page.locator('.el-message--success', { hasText: 'Published version 1' }).waitFor()
    const tpl = await call('GET', `/templates/${key}`, adminToken)
    expect(tpl.latest_version === 1, `latest_version is ${tpl.latest_version}`)
    const v1 = await call('GET', `/templates/${key}/versions/1`, adminToken)
    const start = v1.definition.nodes.find((n) => n.type === 'start')
    expect(start?.trigger?.kind === 'form', 'version 1 has no form trigger')
    expect(v1.definition.edges.some((e) => e.from === 'start' && e.condition?.days?.$gte === 1), 'version 1 lacks the condition')
  })

  await step('the published version opens read-only', async () => {
    await page.click('[data-test=versions]')
    await page.click('[data-test=version-1]')
    await page.waitForURL(new RegExp(`/versions/1$`))
    await page.locator('[data-test=readonly-badge]').waitFor()
    expect((await page.locator('[data-test=palette]').count()) === 0, 'the palette is shown in read-only mode')
  })

  // The business view (builder) draws a template with a condition branch in the people's walk (e2e/people.mjs),
  // once per language.

  await step('a Chinese user reads the field help in Chinese', async () => {
    // The language chosen on this browser (admin's profile names none): the designer's ⓘ speaks it.
    await page.evaluate(() => localStorage.setItem('halley.language', 'zh-CN'))
    await page.goto(`${base}/admin/templates/${key}/versions/1`)
    await page.locator('[data-test=readonly-badge]').waitFor()
    if (await page.locator('[data-test=mode-canvas]').count()) await page.click('[data-test=mode-canvas]')
    await page.click('.vue-flow__node[data-id="approval"] .name')
    await page.hover('[data-test="help-Node-timeout"]')
    await page.locator('.field-help-popper', { hasText: '节点最多可用多久' }).waitFor()
    await page.evaluate(() => localStorage.setItem('halley.language', 'en'))
    await page.reload()
    await page.locator('[data-test=readonly-badge]').waitFor()
  })

  await step('admin signs out', async () => {
    await page.goto(`${base}/inbox`)
    await page.click('[data-test=logout]')
    await page.waitForURL(/\/login/)
  })

  await step('alice starts the process from its form', async () => {
    await login('alice', 'alice-pw-123')
    await page.goto(`${base}/start`)
    await page.locator(`[data-template="${key}"] [data-test=start-template]`).click()
    await page.locator('[data-field=days] input').fill('3')
    await page.locator('[data-field=reason] input').fill('Family trip')
    await page.click('[data-test=start-submit]')
    await page.waitForURL(/\/instances\/[^/?]+/)
    instanceId = new URL(page.url()).pathname.split('/').pop()
    await page.locator('[data-test=instance-status]').getByText('running').waitFor()
    const inst = await call('GET', `/instances/${instanceId}`, adminToken)
    expect(inst.context?.days === 3 && inst.context?.reason === 'Family trip', `context is ${JSON.stringify(inst.context)}`)
  })

  for (const [who, pw, step_] of [
    ['bob', 'bob-pw-123', 'Team lead'],
    ['carol', 'carol-pw-123', 'Manager'],
  ]) {
    await step(`${who} approves on a 390×844 phone`, async () => {
      await login(who, pw, { viewport: { width: 390, height: 844 } })
      await page.waitForURL(/\/m\/inbox/)
      const row = page.locator('[data-test=inbox-task]', { hasText: step_ }).first()
      await row.waitFor()
      await noHorizontalScroll()
      await row.click()
      await page.waitForURL(/\/m\/tasks\//)
      await page.locator('[data-path=days]').getByText('3').waitFor()
      await page.locator('[data-test=diagram] svg').waitFor()
      await noHorizontalScroll()
      await page.click('[data-test=approve]')
      await page.locator('[data-test=action-popup]').waitFor()
      await field(page, 'comment').fill('OK from the phone')
      await page.click('[data-test=confirm]')
      await page.locator('[data-test=task-status][data-status=approved]').waitFor()
      await noHorizontalScroll()
    })
  }

  await step('the request is completed with a green diagram', async () => {
    await login('alice', 'alice-pw-123')
    await page.goto(`${base}/instances/${instanceId}`)
    await page.locator('[data-test=instance-status]').getByText('completed').waitFor()
    await page.locator('[data-test=diagram] svg').waitFor()
    const fills = await page.evaluate(() => {
      const shapes = [...document.querySelectorAll('[data-test=diagram] svg g.node')].map((g) => {
        const shape = g.querySelector('rect, polygon, path, circle, ellipse')
        return { cls: g.getAttribute('class'), fill: shape ? getComputedStyle(shape).fill : '' }
      })
      return shapes
    })
    expect(fills.length >= 4, `the diagram has ${fills.length} nodes`)
    const rgb = (s) => (s.match(/\d+(\.\d+)?/g) ?? []).map(Number)
    const green = fills.filter((f) => {
      const [r, g, b] = rgb(f.fill)
      return g > r && g >= b
    })
    expect(green.length === fills.length, `not every node is green: ${JSON.stringify(fills)}`)
    const inst = await call('GET', `/instances/${instanceId}`, adminToken)
    expect(inst.status === 'completed', `instance status is ${inst.status}`)
    const hist = await call('GET', `/instances/${instanceId}/history`, adminToken)
    expect((hist.items ?? []).length > 0, 'the history is empty')
  })

  await step('a failed request says why and highlights the failing step', async () => {
    const ghostKey = `${key}-ghost`
    const def = {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'manual' } },
        { id: 'review', type: 'approval', name: 'Ghost review', approvers: { users: ['ghost'] } },
        { id: 'end', type: 'end' },
      ],
      edges: [{ from: 'start', to: 'review' }, { from: 'review', to: 'end' }],
    }
    const v = await call('POST', '/templates/validate', adminToken, { definition: def })
    expect(v.valid && v.warnings?.[0]?.code === 'unknown_user', `validation of unknown users: ${JSON.stringify(v)}`)
    await call('POST', '/templates', adminToken, { key: ghostKey, name: 'Ghost review', definition: def })
    await call('POST', `/templates/${ghostKey}/publish`, adminToken)
    const aliceToken = (await call('POST', '/auth/login', undefined, { username: 'alice', password: 'alice-pw-123' })).token
    const inst = await call('POST', '/instances', aliceToken, { template: ghostKey })
    expect(inst.status === 'failed' && inst.error?.code === 'no_approver', `instance ${JSON.stringify(inst.error)} ${inst.status}`)
    await login('alice', 'alice-pw-123')
    await page.goto(`${base}/instances/${inst.id}`)
    await page.locator('[data-test=instance-error][data-code=no_approver]').waitFor()
    const text = await page.locator('[data-test=instance-error-text]').innerText()
    expect(text.trim().length > 10, `error text: ${text}`)
    await page.locator('[data-failing=true]').getByText('Ghost review').waitFor()
    await page.locator('[data-test=diagram] svg').waitFor()
    const highlighted = await page.evaluate(() => document.querySelector('[data-test=diagram] svg')?.innerHTML.includes('stroke-width:4px'))
    expect(highlighted, 'the failing node is not highlighted in the diagram')
    await page.locator('[data-test=edge-legend]').waitFor()
  })

  await step('(issue 27) a sub-process per line: the parent lists its children, a child links its parent; the designer offers the node', async () => {
    const start = { id: 'start', type: 'start', trigger: { kind: 'manual' } }
    await publishTemplate(adminToken, 'e2e-pay', { nodes: [start, { id: 'pay', type: 'approval', approvers: { users: ['bob'] } }, { id: 'end', type: 'end' }],
      edges: [{ from: 'start', to: 'pay' }, { from: 'pay', to: 'end' }] })
    await publishTemplate(adminToken, 'e2e-claim', { nodes: [start, { id: 'lines', type: 'subprocess', name: 'Pay lines', template: 'e2e-pay', for_each: 'lines', output: { n: 'item' } },
      { id: 'end', type: 'end' }], edges: [{ from: 'start', to: 'lines' }, { from: 'lines', to: 'end' }] })
    const parent = await call('POST', '/instances', adminToken, { template: 'e2e-claim', context: { lines: [1, 2] } })
    expect(parent.children?.length === 2 && parent.children[0].status === 'running', `children: ${JSON.stringify(parent.children)}`)
    await login('admin', ADMIN_PASSWORD)
    await page.goto(`${base}/instances/${parent.id}`)
    const kids = page.locator('[data-test=instance-children]')
    await kids.waitFor()
    expect((await kids.locator('tbody tr').count()) === 2, 'the parent does not list its two children')
    await kids.locator('tbody tr a').first().click()
    await page.waitForURL(new RegExp(`/instances/${parent.children[0].id}$`))
    await page.locator('[data-test=instance-parent]').waitFor()
    await page.locator('[data-test=instance-parent] a').click()
    await page.waitForURL(new RegExp(`/instances/${parent.id}$`))
    await kids.waitFor()
    const diagram = await call('GET', `/instances/${parent.id}/diagram`, adminToken)
    expect(String(diagram.mermaid ?? diagram).includes('2 running'), 'the diagram does not show the children')
    await page.goto(`${base}/admin/templates/e2e-claim/designer`)
    await page.locator('[data-test=palette-subprocess]').waitFor()
    await page.click('.vue-flow__node[data-id="lines"] .name')
    await page.locator('[data-test=node-panel] [data-test=node-template]').getByText('e2e-pay').waitFor()
    expect((await field(page, 'node-for-each').inputValue()) === 'lines', 'the for_each field does not show lines')
    await page.locator('[data-test=node-output-add]').waitFor()
  })

  await step('the app is served under a strict Content-Security-Policy', async () => {
    const r = await fetch(`${base}/inbox`)
    const csp = r.headers.get('content-security-policy') ?? ''
    const scriptSrc = csp.split(';').map((x) => x.trim()).find((x) => x.startsWith('script-src')) ?? ''
    expect(scriptSrc === "script-src 'self'", `script-src is "${scriptSrc}" (CSP: ${csp})`)
    expect(csp.includes("frame-ancestors 'none'") && r.headers.get('x-frame-options') === 'DENY', `the app may be framed: ${csp}`)
    expect(r.headers.get('x-content-type-options') === 'nosniff', 'no nosniff')
    expect(r.headers.get('referrer-policy') === 'no-referrer', `referrer policy ${r.headers.get('referrer-policy')}`)
  })

  const aliceToken = (await call('POST', '/auth/login', undefined, { username: 'alice', password: 'alice-pw-123' })).token
  const files = { id: 'files', type: 'attachment', label: 'Files', field: 'files', readonly: true }
  const pwn = [
    { name: 'evil.pdf', size: 10, type: 'application/pdf', data_url: "javascript:window.__pwned='href';alert('xss')" },
    { name: 'page.html', size: 40, type: 'text/html', data_url: 'data:text/html;base64,' + Buffer.from('<script>parent.__pwned="data"</script>').toString('base64') },
  ]

  await step('a javascript: URL submitted through a form is refused', async () => {
    await publishTemplate(adminToken, 'xss-form', {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'form', form: { kind: 'components', fields: [{ ...files, readonly: false }] } } },
        { id: 'end', type: 'end' },
      ],
      edges: [{ from: 'start', to: 'end' }],
    })
    const r = await raw('POST', '/forms/xss-form/submit', undefined, { files: [pwn[0]] })
    expect(r.status === 422 && r.json?.error?.code === 'invalid_file', `anonymous submit with a javascript: URL: ${r.status} ${JSON.stringify(r.json)}`)
  })

  let xssTask
  await step('a javascript: URL in a request runs nothing in the approver\'s browser', async () => {
    // Every start refuses it now (invalid_file); a system's message still writes what it likes under its callback
    // node, here where bob's form shows a file field: the page must render it as nothing but files.
    const delivered = { ...files, field: 'docs.files' }
    await publishTemplate(adminToken, 'xss', {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'manual' } },
        { id: 'docs', type: 'callback', message: 'docs.delivered' },
        {
          id: 'check',
          type: 'approval',
          name: 'Check',
          approvers: { users: ['bob'] },
          form: {
            kind: 'components',
            fields: [delivered, { id: 'note', type: 'input', label: 'Note', field: 'note', readonly: true }, { id: 'ok', type: 'input', label: 'Your remark', field: 'check.remark' }],
          },
        },
        { id: 'end', type: 'end' },
      ],
      edges: [
        { from: 'start', to: 'docs' },
        { from: 'docs', to: 'check' },
        { from: 'check', to: 'end' },
      ],
    })
    const refused = await raw('POST', '/instances', aliceToken, { template: 'xss', context: { docs: { files: pwn } } })
    expect(refused.status === 422 && refused.json?.error?.code === 'invalid_file', `a start with a javascript: URL: ${refused.status} ${JSON.stringify(refused.json)}`)
    const inst = await call('POST', '/instances', aliceToken, {
      template: 'xss',
      correlation_id: 'xss-docs',
      context: { note: '<img src=x onerror="window.__pwned=\'img\'">', link: "javascript:window.__pwned='link'" },
    })
    await call('POST', '/messages', adminToken, { name: 'docs.delivered', correlation_id: 'xss-docs', data: { files: pwn } })
    xssTask = (await call('GET', `/instances/${inst.id}`, adminToken)).tasks[0].id
    await login('bob', 'bob-pw-123')
    await page.goto(`${base}/tasks/${xssTask}`)
    await page.locator('[data-field="docs.files"]').waitFor()
    const hrefs = await page.evaluate(() => [...document.querySelectorAll('[href], [src]')].map((e) => e.getAttribute('href') ?? e.getAttribute('src')))
    const bad = hrefs.filter((h) => /^\s*(javascript|data|vbscript):/i.test(h ?? ''))
    expect(bad.length === 0, `context values became links: ${JSON.stringify(bad)}`)
    await page.locator('[data-field="docs.files"]').getByText('evil.pdf').click()
    await page.locator('[data-field="docs.files"]').getByText('page.html').click()
    await page.locator('[data-field=note]').waitFor()
    await page.waitForTimeout(500)
    const pwned = await page.evaluate(() => window.__pwned)
    expect(pwned === undefined, `script ran: window.__pwned = ${pwned}`)
    expect(dialogs.length === 0, `dialogs opened: ${JSON.stringify(dialogs)}`)
    expect(new URL(page.url()).pathname === `/tasks/${xssTask}`, `the page navigated to ${page.url()}`)
    // And were markup injected anyway, the policy stops its script.
    expectViolations = true
    const blocked = await page.evaluate(
      () =>
        new Promise((res) => {
          document.addEventListener('securitypolicyviolation', (e) => res(e.violatedDirective), { once: true })
          document.body.insertAdjacentHTML('beforeend', '<img src="data:," onerror="window.__pwned=\'inline\'">')
          setTimeout(() => res(null), 2000)
        }),
    )
    await page.waitForTimeout(200)
    expectViolations = false
    expect(String(blocked).startsWith('script-src'), `an injected inline handler was not blocked by the policy (${blocked})`)
    expect((await page.evaluate(() => window.__pwned)) === undefined, 'the injected inline handler ran')
    // bob fills in his field and approves: only it is sent.
    await page.locator('[data-field="check.remark"] input').fill('looked at it')
    await page.click('[data-test=approve]')
    await page.click('[data-test=confirm]')
    await page.locator('[data-test=task-status]').getByText('approved').waitFor()
    const after = await call('GET', `/instances/${inst.id}`, adminToken)
    expect(after.context?.check?.remark === 'looked at it' && after.context?.note?.startsWith('<img'), `context after approve: ${JSON.stringify(after.context)}`)
  })

  await step('an HTML form template runs in its sandboxed frame', async () => {
    const html = `<p id="amount"></p><p id="token"></p>
<script>
  document.getElementById('amount').textContent = 'Amount: ' + window.halley.context.amount;
  var t = 'no access';
  try { t = String(window.parent.localStorage.length); } catch (e) {}
  document.getElementById('token').textContent = 'Parent storage: ' + t;
</script>`
    await publishTemplate(adminToken, 'html-form', {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'manual' } },
        { id: 'look', type: 'approval', name: 'Look', approvers: { users: ['bob'] }, form: { kind: 'html', html } },
        { id: 'end', type: 'end' },
      ],
      edges: [
        { from: 'start', to: 'look' },
        { from: 'look', to: 'end' },
      ],
    })
    const inst = await call('POST', '/instances', aliceToken, { template: 'html-form', context: { amount: 42 } })
    await page.goto(`${base}/tasks/${inst.tasks[0].id}`)
    await page.locator('[data-test=html-form]').waitFor()
    const frame = page.frameLocator('[data-test=html-form]')
    await frame.locator('#amount', { hasText: 'Amount: 42' }).waitFor()
    const token = await frame.locator('#token').textContent()
    expect(token === 'Parent storage: no access', `the form's script reached the app's storage: ${token}`)
  })

  // ---- issue 16: a plugin run that never started, people, profile, the forced password change ----
  await step('a plugin run that never started shows its error and no exit code', async () => {
    const fd = new FormData()
    fd.set('name', 'not-a-program')
    fd.set('runtime', 'binary')
    fd.set('file', new Blob(['this is not a program\n']), 'not-a-program')
    const up = await fetch(`${base}/api/v1/plugins`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` }, body: fd })
    expect(up.status === 201, `upload: ${up.status}`)
    const def = {
      nodes: [{ id: 'start', type: 'start', trigger: { kind: 'manual' } }, { id: 'work', type: 'auto', plugins: { after: ['not-a-program'] } }, { id: 'end', type: 'end' }],
      edges: [{ from: 'start', to: 'work' }, { from: 'work', to: 'end' }],
    }
    await call('POST', '/templates', adminToken, { key: `broken-${key}`, name: 'Broken plugin (e2e)', definition: def })
    await call('POST', `/templates/broken-${key}/publish`, adminToken)
    const inst = await call('POST', '/instances', adminToken, { template: `broken-${key}` })
    await login('admin', ADMIN_PASSWORD)
    await page.goto(`${base}/admin/plugins/not-a-program`)
    await page.locator('[data-test=run-error]', { hasText: 'unable to start' }).first().waitFor()
    const exit = await page.locator('[data-test^=run-exit-]').first().innerText()
    expect(exit.trim().startsWith('—'), `the exit cell should start with — (no exit code): ${exit}`)
    const runs = await call('GET', `/plugins/not-a-program/runs?instance_id=${inst.id}`, adminToken)
    expect(runs.items[0].status === 'failed' && runs.items[0].exit_code === null && /unable to start/.test(runs.items[0].error), JSON.stringify(runs.items[0]))
    // The full log of the run comes from the database (any replica shows it).
    await page.locator('[data-test=plugin-runs] .el-table__expand-icon').first().click()
    await page.locator('[data-test=run-log]:visible').first().click()
    const log = page.locator('[data-test=run-log-text]', { hasText: `=== run ${runs.items[0].id} attempt 1 ===` })
    await log.waitFor()
    expect(/unable to start/.test(await log.innerText()), 'the full log names why the run never started')
  })

  await step('admin edits, disables, enables and resets users on the Users page', async () => {
    await page.goto(`${base}/admin/users`)
    await page.click('[data-test=edit-carol]')
    await field(page, 'edit-display-name').fill('Carol the Manager')
    await field(page, 'edit-email').fill('carol@example.com')
    await page.click('[data-test=save-user]')
    await page.locator('[data-test=users-table]').getByText('Carol the Manager').waitFor()
    const carol = await call('GET', '/users/carol', adminToken)
    expect(carol.display_name === 'Carol the Manager' && carol.email === 'carol@example.com' && carol.roles.includes('manager'), JSON.stringify(carol))

    await page.click('[data-test=disable-carol]')
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('[data-test=status-carol][data-disabled=true]').waitFor()
    const r = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'carol', password: 'carol-pw-123' }) })
    const body = await r.json()
    expect(r.status === 403 && body.error?.code === 'user_disabled', `a disabled user's login: ${r.status} ${JSON.stringify(body)}`)
    await page.click('[data-test=enable-carol]')
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('[data-test=status-carol][data-disabled=false]').waitFor()

    await page.click('[data-test=reset-alice]')
    await field(page, 'reset-new').fill('short')
    await field(page, 'reset-repeat').fill('short')
    await page.click('[data-test=do-reset]')
    await page.locator('[data-test=reset-error]').waitFor()
    await field(page, 'reset-new').fill('alice-reset-1')
    await field(page, 'reset-repeat').fill('alice-reset-1')
    await page.click('[data-test=do-reset]')
    // This reset's own message: the one of enabling carol may still show, and leaving the page before the answer
    // cancels the reset (alice's sign-in then fails).
    await page.locator('.el-message--success', { hasText: 'The password of alice was reset' }).waitFor()
  })

  await step('alice must choose a new password after the reset, and cannot skip it', async () => {
    await login('alice', 'alice-reset-1')
    await page.waitForURL((u) => u.pathname === '/password')
    await page.goto(`${base}/inbox`)
    await page.waitForURL((u) => u.pathname === '/password')
    await page.fill('input[name=current-password]', 'alice-reset-1')
    await page.fill('input[name=new-password]', 'alice-own-pw-2')
    await page.fill('input[name=repeat-password]', 'alice-own-pw-2')
    await page.click('[data-test=password-submit]')
    await page.waitForURL((u) => u.pathname === '/inbox')
    const me = await call('GET', '/me', (await call('POST', '/auth/login', undefined, { username: 'alice', password: 'alice-own-pw-2' })).token)
    expect(me.password_change_required === false, JSON.stringify(me))
  })

  await step('alice switches her profile to 中文 and back to English', async () => {
    await page.click('[data-test=profile-link]')
    await page.waitForURL(/\/profile$/)
    await page.locator('[data-test=profile-language] [data-lang="zh-CN"]').click()
    await page.click('[data-test=profile-save]')
    await page.locator('.app-header nav').getByText('待办').waitFor()
    const tok = (await call('POST', '/auth/login', undefined, { username: 'alice', password: 'alice-own-pw-2' })).token
    expect((await call('GET', '/me', tok)).language === 'zh-CN', 'the language is kept on the profile')
    await page.locator('[data-test=profile-language] [data-lang="en"]').click()
    await page.click('[data-test=profile-save]')
    await page.locator('.app-header nav').getByText('Inbox').waitFor()
  })

  await step('bob reaches his profile from the phone inbox and saves his email', async () => {
    await login('bob', 'bob-pw-123', { viewport: { width: 390, height: 844 } })
    await page.waitForURL(/\/m\/inbox/)
    await page.click('[data-test=profile-link]')
    await page.waitForURL(/\/m\/profile/)
    await noHorizontalScroll()
    await field(page, 'profile-email').fill('bob@example.com')
    await page.click('[data-test=profile-save]')
    await page.locator('.van-toast', { hasText: 'Profile saved' }).waitFor()
    const tok = (await call('POST', '/auth/login', undefined, { username: 'bob', password: 'bob-pw-123' })).token
    expect((await call('GET', '/me', tok)).email === 'bob@example.com', 'the email is saved')
    await noHorizontalScroll()
  })

  // ---- issue 26: notifications ----
  await step('people hear of their work: the bell counts the unread ones and opens the request; the phone inbox too', async () => {
    await login('alice', 'alice-own-pw-2')
    const aliceToken = (await call('POST', '/auth/login', undefined, { username: 'alice', password: 'alice-own-pw-2' })).token
    const unread = (await call('GET', '/notifications', aliceToken)).unread
    expect(unread >= 1, `alice's unread notifications: ${unread}`)
    // The badge shows what the server counts (it is read after the sign-in; wait for it, never for a guess).
    const badge = page.locator('[data-test=notification-badge] .el-badge__content', { hasText: new RegExp(`^${unread}$`) })
    await badge.waitFor()
    await page.click('[data-test=notification-bell]')
    const item = page.locator('[data-test=notification-item]', { hasText: 'Request approved' }).first()
    await item.waitFor()
    await item.click()
    await page.waitForURL(/\/instances\/[^/]+$/) // her newest approved request
    const after = await call('GET', '/notifications', aliceToken)
    expect(after.unread === unread - 1, `unread after opening one: ${after.unread}, before ${unread}`)
    await login('bob', 'bob-pw-123', { viewport: { width: 390, height: 844 } })
    await page.waitForURL(/\/m\/inbox/)
    await page.click('[data-test=notification-bell]')
    await page.waitForURL(/\/m\/notifications/)
    await page.locator('[data-test=notification-item]', { hasText: 'New task' }).first().waitFor()
    await noHorizontalScroll()
  })

  await step('admin adds a webhook channel, tests it, and sends new tasks through it in the settings', async () => {
    const got = []
    const receiver = createHTTPServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        got.push({ headers: req.headers, body })
        res.writeHead(204).end()
      })
    })
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r))
    try {
      await login('admin', ADMIN_PASSWORD)
      await page.goto(`${base}/admin/channels`)
      await page.click('[data-test=new-channel]')
      await field(page, 'channel-name').fill('e2e-hook')
      await page.click('[data-test=channel-kind]')
      await pickOption('Webhook')
      await field(page, 'channel-url').fill(`http://127.0.0.1:${receiver.address().port}/notify?token=e2e-url-secret`)
      await field(page, 'channel-secret').fill('e2e-signing-secret')
      await page.click('[data-test=create-channel]')
      const row = page.locator('[data-test=channels-table] .el-table__row', { hasText: 'e2e-hook' })
      await row.waitFor()
      const shown = await page.locator('[data-test=channels-table]').innerText()
      expect(shown.includes('http://127.0.0.1:') && shown.includes('/***') && !shown.includes('e2e-url-secret'), `the list shows the URL by host only: ${shown}`)
      await page.click('[data-test=test-channel-e2e-hook]')
      await page.click('[data-test=run-test]')
      await page.locator('[data-test=test-result]', { hasText: 'accepted' }).waitFor()
      expect(got.length === 1 && got[0].headers['x-halley-signature']?.startsWith('sha256='), `the receiver got ${got.length} signed test messages`)
      await page.locator('.el-dialog:visible [data-test=run-test]').press('Escape')
      await page.goto(`${base}/admin/notification-settings`)
      await page.click('[data-test="channels-task.created"]')
      await pickOption('e2e-hook')
      await page.click('[data-test=save-notification-settings]')
      await page.locator('.el-message', { hasText: 'saved' }).waitFor()
      const settings = await call('GET', '/notification-settings', adminToken)
      expect(JSON.stringify(settings.events['task.created']) === '["e2e-hook"]', JSON.stringify(settings))
      const channels = JSON.stringify(await call('GET', '/channels', adminToken))
      expect(!channels.includes('e2e-signing-secret') && !channels.includes('e2e-url-secret'), channels)
    } finally {
      receiver.close()
    }
  })

  // ---- issue 20: API tokens, deleting a user, the audit log ----
  await step('admin creates an API token with an expiry, sees it once, and deletes it', async () => {
    await login('admin', ADMIN_PASSWORD)
    await page.goto(`${base}/admin/tokens`)
    await page.click('[data-test=new-token]')
    await field(page, 'token-name').fill('e2e-erp')
    const expiry = field(page, 'token-expires')
    await expiry.click()
    await expiry.fill('2031-01-02 03:04:05')
    await expiry.press('Enter')
    await page.click('[data-test=create-token]')
    const value = await field(page, 'token-value').inputValue()
    expect(value.startsWith('hly_'), `the token is shown once: ${value}`)
    const me = await call('GET', '/me', value)
    expect(me.token === true && me.username === 'token:e2e-erp', JSON.stringify(me))
    await page.click('[data-test=token-done]')
    const listed = (await call('GET', '/tokens', adminToken)).items.find((x) => x.name === 'e2e-erp')
    expect(listed && listed.owner === 'admin' && listed.expires_at?.startsWith('2031-01-0') && !('token' in listed), JSON.stringify(listed))
    await page.locator('[data-test=expires-e2e-erp]', { hasText: '2031' }).waitFor()
    await page.click('[data-test=delete-token-e2e-erp]')
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('[data-test=delete-token-e2e-erp]').waitFor({ state: 'detached' })
    const r = await fetch(`${base}/api/v1/me`, { headers: { authorization: `Bearer ${value}` } })
    expect(r.status === 401, `a deleted token: ${r.status}`)
  })

  await step('admin deletes a user on the Users page; they cannot sign in any more', async () => {
    await call('POST', '/users', adminToken, { username: 'dave', password: 'dave-pw-123', display_name: 'Dave Leaving', password_change_required: false })
    await page.goto(`${base}/admin/users`)
    await page.click('[data-test=delete-dave]')
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('[data-test=delete-dave]').waitFor({ state: 'detached' })
    const r = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'dave', password: 'dave-pw-123' }) })
    expect(r.status === 401, `a deleted user's login: ${r.status}`)
    expect((await page.locator('[data-test=delete-admin]').count()) === 0, 'no delete button for oneself')
  })

  await step('the audit log lists the changes and shows a before/after diff', async () => {
    await page.goto(`${base}/admin/audit`)
    await page.locator('[data-test=audit-table] .el-table__row').first().waitFor()
    await field(page, 'audit-actor').fill('admin')
    await page.click('[data-test=audit-action]')
    await page.locator('.el-select-dropdown__item:visible', { hasText: 'User changed' }).click()
    await page.click('[data-test=audit-search]')
    await page.locator('[data-test=audit-table] .el-table__row', { hasText: 'carol' }).first().waitFor()
    // The oldest of carol's three changes (edit, disable, enable) is the edit of her name and email.
    await page.locator('[data-test="audit-open-user.update"]').last().click()
    const diffTable = page.locator('[data-test=audit-diff]')
    await diffTable.getByText('Carol the Manager').waitFor()
    await diffTable.getByText('display_name').waitFor()
    const entries = (await call('GET', '/audit?action=token.*', adminToken)).items.map((x) => x.action)
    expect(entries.includes('token.create') && entries.includes('token.delete'), JSON.stringify(entries))
  })

  // ---- the whole UI in Chinese: no English left on the main pages (the i18n issue) ----
  await step('a Chinese user and a Chinese admin read no English on the main pages', async () => {
    for (const u of [
      { username: 'zhao', password: 'zhao-pw-123', display_name: '赵敏', department: 'Sales', manager: 'qian', roles: [] },
      { username: 'qian', password: 'qian-pw-123', display_name: '钱进', department: 'Sales', roles: ['lead'] },
    ]) {
      await call('POST', '/users', adminToken, { ...u, password_change_required: false })
      const tok = (await call('POST', '/auth/login', undefined, { username: u.username, password: u.password })).token
      await call('PUT', '/me', tok, { language: 'zh-CN' })
    }
    await call('PUT', '/me', adminToken, { language: 'zh-CN' })
    const zhKey = `zh-leave-${key}`
    await call('POST', '/templates', adminToken, { key: zhKey, name: '请假（e2e）', description: '中文流程', definition: {
      nodes: [
        {
          id: 'start',
          type: 'start',
          name: '提交申请',
          trigger: {
            kind: 'form',
            require_login: true,
            form: {
              kind: 'components',
              fields: [
                { id: 'd', type: 'number', label: '天数', field: 'days', required: true, min: 1 },
                { id: 'k', type: 'select', label: '类型', field: 'kind', options: [{ label: '年假', value: 'annual' }, { label: '病假', value: 'sick' }] },
                { id: 'r', type: 'date-range', label: '起止日期', field: 'range' },
              ],
            },
          },
        },
        { id: 'lead', type: 'approval', name: '主管审批', approvers: { relation: 'initiator.manager' }, cc: { users: ['zhao'] } },
        { id: 'hr', type: 'approval', name: '人事备案', approvers: { users: ['qian'] } },
        { id: 'end', type: 'end', name: '结束' },
      ],
      edges: [
        { from: 'start', to: 'lead' },
        { from: 'lead', to: 'hr', condition: { days: { $gte: 3 } } },
        { from: 'lead', to: 'end', default: true },
        { from: 'hr', to: 'end' },
      ],
    } })
    await call('POST', `/templates/${zhKey}/publish`, adminToken)
    const zhaoToken = (await call('POST', '/auth/login', undefined, { username: 'zhao', password: 'zhao-pw-123' })).token
    const qianToken = (await call('POST', '/auth/login', undefined, { username: 'qian', password: 'qian-pw-123' })).token
    const pending = await call('POST', `/forms/${zhKey}/submit`, zhaoToken, { days: 1, kind: 'sick', range: ['2030-01-01', '2030-01-02'] })
    const done = await call('POST', `/forms/${zhKey}/submit`, zhaoToken, { days: 2, kind: 'annual' })
    const doneTask = (await call('GET', `/instances/${done.id}`, qianToken)).tasks.find((t) => t.status === 'pending')
    await call('POST', `/tasks/${doneTask.id}/approve`, qianToken, { comment: '同意' })
    const task = (await call('GET', `/instances/${pending.id}`, qianToken)).tasks.find((t) => t.status === 'pending')

    // What the pages show that is data, not UI: names, keys, titles, values, comments and server diagnostics, as
    // the API gives them to the admin. Everything else on a page must be Chinese.
    // 'token:' prefixes a token's name where an actor is named (typed as is in the audit log's filter).
    const data = new Set(['Halley', 'English', 'token:'])
    // add takes values; withKeys the keys too (a context without a form is shown by its paths).
    const add = (v, withKeys = false) => {
      if (typeof v === 'string' && v.trim()) data.add(v.trim())
      else if (typeof v === 'number') data.add(String(v))
      else if (Array.isArray(v)) v.forEach((x) => add(x, withKeys))
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          if (withKeys) add(k)
          add(x, withKeys)
        }
      }
    }
    const users = await call('GET', '/users', adminToken)
    const list = (x) => x?.items ?? x ?? []
    for (const u of list(users)) add([u.username, u.display_name, u.department, u.manager, u.email, u.roles])
    for (const t of list(await call('GET', '/templates', adminToken))) {
      add([t.key, t.name, t.description, t.start_kind])
      const full = await call('GET', `/templates/${t.key}`, adminToken)
      const def = full.draft?.definition ?? full.draft
      add(def)
      for (const e of def?.edges ?? []) add(e.condition, true) // a condition is shown by its paths and values (and the operators, as code)
    }
    const insts = await call('GET', '/instances?limit=200', adminToken)
    for (const { id } of insts.items) {
      const i = await call('GET', `/instances/${id}`, adminToken)
      add([i.id, i.title, i.template, i.initiator, i.correlation_id, i.error, (i.tasks ?? []).map((t) => [t.node_name, t.assignee])])
      add(i.context, true)
      for (const h of list(await call('GET', `/instances/${i.id}/history`, adminToken))) add([h.actor, h.actor?.replace(/^(plugin|token):/, ''), h.comment, h.node_id]) // a plugin or token actor shows as 插件 name
    }
    for (const p of list(await call('GET', '/plugins', adminToken))) add(p.name)
    // The sandbox report's diagnostics (paths, uids, the reasons a protection is not in force) are the server's.
    add(await call('GET', '/plugins/sandbox', adminToken))
    // A token for the tokens page to list (the issue 20 step deleted its own); the audit log's entries.
    await call('POST', '/tokens', adminToken, { name: 'erp-zh', roles: ['admin'], expires_at: '2031-06-01T00:00:00Z' })
    for (const t of list(await call('GET', '/tokens', adminToken))) add([t.id, t.name, t.roles, t.owner, t.created_by])
    for (const e of list(await call('GET', '/audit?limit=200', adminToken))) add([e.actor, e.actor_token, e.action, e.target, e.reason, e.ip, e.request_id])
    // The notification channels' names and settings, and what receivers answered (the delivery log's errors).
    for (const c of list(await call('GET', '/channels', adminToken))) add([c.name, c.created_by, Object.values(c.config)])
    for (const d of list(await call('GET', '/notification-deliveries?limit=200', adminToken))) add([d.channel, d.recipient, d.last_error])
    // Longest first, and only where they stand as words (the user "lead" must not cut "leader" in two).
    const patterns = (words) =>
      [...words]
        .sort((a, b) => b.length - a.length)
        .map((d) => new RegExp(`(?<![A-Za-z])${d.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![A-Za-z])`, 'g'))
    const dataPatterns = patterns(data)
    // The definition's field names and enumerated values are code a template author writes (is_ignore, pre,
    // on_timeout "approve"): the designer's labels and its ⓘ help name them as they are, and nothing else may.
    const schemaWords = new Set(['gjson'])
    const collect = (v) => {
      if (Array.isArray(v)) return v.forEach(collect)
      if (!v || typeof v !== 'object') return
      for (const [k, x] of Object.entries(v)) {
        if (k === 'properties' && x && typeof x === 'object') Object.keys(x).forEach((f) => schemaWords.add(f))
        if (k === 'enum' && Array.isArray(x)) x.forEach((e) => typeof e === 'string' && schemaWords.add(e))
        collect(x)
      }
    }
    collect(await call('GET', '/schemas/definition.json', adminToken))
    const schemaPatterns = patterns(schemaWords)
    // Words a Chinese page uses as they are: abbreviations, units, the checksum's name.
    const allowed = new Set(['ID', 'JSON', 'HTML', 'API', 'IM', 'KiB', 'MiB', 'sha', 'Python', 'CNY', 'cgroup', 'IP'])
    const keyLike = /\b(common|nav|title|login|password|profile|users|tokens|audit|plugin|status|pick|h5|inbox|task|actions|summary|history|context|form|linear|start|triggerKind|requests|cc|instance|nodeError|edges|diagram|notFound|templates|adminInstances|forms|nodeType|definition|canvas|approvers|sign|fieldType|designer|join|nodePanel|trigger|approversEditor|edgePanel|node|formDesigner|http|apiError|validation|time)\.[A-Za-z_.-]+/

    async function english(label, { schema = false } = {}) {
      await page.waitForLoadState('networkidle').catch(() => {})
      await page.waitForTimeout(400)
      // The text a user reads: visible text outside code (ids, keys, JSON are code), and the placeholders and titles
      // of what is visible.
      const text = await page.evaluate(() => {
        const out = []
        const skip = (el) => !!el.closest('code, pre, .mono, script, style, noscript') || (el.checkVisibility && !el.checkVisibility())
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT)
        for (let n = walker.nextNode(); n; n = walker.nextNode()) if (n.parentElement && !skip(n.parentElement) && n.textContent.trim()) out.push(n.textContent)
        for (const el of document.querySelectorAll('[placeholder], [aria-label]')) if (!skip(el)) out.push(el.getAttribute('placeholder') ?? '', el.getAttribute('aria-label') ?? '')
        return out.join('\n')
      })
      let rest = text
      for (const d of dataPatterns) rest = rest.replace(d, ' ')
      if (schema) for (const d of schemaPatterns) rest = rest.replace(d, ' ')
      expect(!keyLike.test(rest), `${label}: a message key shows: ${rest.match(keyLike)?.[0]}`)
      rest = rest.replace(/\b(?=[0-9a-f.-]*\d)[0-9a-f][0-9a-f.-]{3,}\b/gi, ' ') // ids
      const words = [...new Set(rest.match(/[A-Za-z]{2,}/g) ?? [])].filter((w) => !allowed.has(w))
      expect(words.length === 0, `${label} (${new URL(page.url()).pathname}) shows English: ${words.join(', ')}`)
      await page.screenshot({ path: join(artifacts, `zh-${label.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true }).catch(() => {})
    }

    const desktop = { width: 1440, height: 900 }
    const phone = { width: 390, height: 844 }
    await login('zhao', 'zhao-pw-123')
    await page.locator('.app-header nav').getByText('待办').waitFor()
    await english('inbox (empty)')
    await page.goto(`${base}/start`)
    await english('start')
    await page.goto(`${base}/start/${zhKey}`)
    await page.locator('[data-field=days]').waitFor()
    await english('start form')
    await page.click('[data-test=start-submit]')
    await page.locator('.el-form-item__error').first().waitFor()
    await english('start form, a required field missing')
    await page.goto(`${base}/requests`)
    await page.locator('[data-test=requests] .el-table__row').first().waitFor()
    await english('my requests')
    await page.goto(`${base}/cc`)
    await english('copied to me')
    await page.goto(`${base}/instances/${pending.id}`)
    await page.locator('[data-test=diagram] svg').waitFor()
    await english('a running request')
    await page.goto(`${base}/instances/${done.id}`)
    await page.locator('[data-test=diagram] svg').waitFor()
    const edgeText = await page.locator('[data-test=diagram] svg').evaluate((el) => el.textContent)
    expect(/默认/.test(edgeText) && /未选中/.test(edgeText) && !/default|pruned|killed/.test(edgeText), `the diagram's edge labels: ${edgeText}`)
    await english('a completed request')
    await page.goto(`${base}/profile`)
    await english('profile')
    await page.goto(`${base}/nowhere`)
    await english('not found')
    await page.setViewportSize(phone)
    await page.goto(`${base}/instances/${pending.id}`)
    await page.locator('[data-test=diagram] svg').waitFor()
    await noHorizontalScroll()
    await english('a running request on a phone')
    await page.goto(`${base}/requests`)
    await noHorizontalScroll()
    await english('my requests on a phone')
    await page.goto(`${base}/start/${zhKey}`)
    await page.locator('[data-field=days]').waitFor()
    await noHorizontalScroll()
    await english('start form on a phone')

    await login('qian', 'qian-pw-123')
    await page.locator('[data-test=inbox-task]').first().waitFor()
    await english('inbox')
    await page.goto(`${base}/tasks/${task.id}`)
    await page.locator('[data-test=approve]').waitFor()
    await english('task')
    await page.click('[data-test=reject]')
    await page.click('[data-test=confirm]')
    await page.locator('.el-dialog .el-form-item__error').waitFor()
    await english('reject without a comment')
    await page.keyboard.press('Escape')
    await login('qian', 'qian-pw-123', { viewport: phone })
    await page.waitForURL(/\/m\/inbox/)
    await page.locator('[data-test=inbox-task]').first().waitFor()
    await english('phone inbox')
    await page.goto(`${base}/m/tasks/${task.id}`)
    await page.locator('[data-test=approve]').waitFor()
    await noHorizontalScroll()
    await english('phone task')
    await page.click('[data-test=approve]')
    await page.locator('[data-test=action-popup]').waitFor()
    await english('phone approve sheet')
    await page.click('[data-test=confirm]')
    await page.locator('[data-test=task-status][data-status=approved]').waitFor()
    await english('phone task approved')
    await page.goto(`${base}/m/profile`)
    await english('phone profile')
    await page.goto(`${base}/m/notifications`)
    await page.locator('[data-test=notification-item]').first().waitFor()
    await english('phone notifications')

    await login('admin', ADMIN_PASSWORD, { viewport: desktop })
    for (const [label, path] of [
      ['templates', '/admin/templates'],
      ['instances', '/admin/instances'],
      ['plugins', '/admin/plugins'],
      ['users', '/admin/users'],
      ['API tokens', '/admin/tokens'],
      ['audit log', '/admin/audit'],
      ['notification channels', '/admin/channels'],
      ['notification settings', '/admin/notification-settings'],
      ['form designer', '/admin/forms'],
      ['a network-off plugin', '/admin/plugins/offline-calc'],
    ]) {
      await page.goto(`${base}${path}`)
      await english(`admin ${label}`)
    }
    await page.goto(`${base}/admin/plugins`)
    await page.click('[data-test=sandbox-toggle]')
    await page.locator('[data-test=sandbox-table]').waitFor()
    await english('admin plugins, the sandbox in detail')
    await page.goto(`${base}/admin/tokens`)
    await page.locator('[data-test=tokens-table] .el-table__row', { hasText: 'erp-zh' }).waitFor()
    await english('admin API tokens, one listed')
    await page.goto(`${base}/admin/audit`)
    await page.locator('[data-test="audit-open-user.update"]').first().click()
    await page.locator('[data-test=audit-diff]').waitFor()
    await english('admin audit log, an entry opened')
    await page.goto(`${base}/admin/templates/${zhKey}/designer`)
    await page.locator('[data-test=validation-status][data-valid=true]').waitFor()
    allowed.add('Delete') // the key, in the palette's tips
    await english('admin designer')
    // The node panel: every label with its ⓘ (the help itself is checked in Chinese by the field-help step).
    await page.click('.vue-flow__node[data-id="lead"] .name')
    await page.locator('[data-test=node-panel] [data-test="help-Node-timeout"]').waitFor()
    await english('admin designer, an approval selected', { schema: true })
    await page.setViewportSize(phone)
    for (const [label, path] of [
      ['instances', '/admin/instances'],
      ['plugins', '/admin/plugins'],
      ['API tokens', '/admin/tokens'],
      ['audit log', '/admin/audit'],
    ]) {
      await page.goto(`${base}${path}`)
      await noHorizontalScroll()
      await english(`admin ${label} on a phone`)
    }

    await call('PUT', '/me', adminToken, { language: 'en' })
    await page.evaluate(() => localStorage.setItem('halley.language', 'en'))
  })

  let ticketTask, ticketInstance
  await step('a phone approver sees a required field\'s error only once they touch it or press approve', async () => {
    await call('POST', '/users', adminToken, { username: 'dan', password: 'dan-pw-12345', display_name: 'Dan Approver', roles: [], password_change_required: false })
    await call('POST', '/templates', adminToken, { key: 'ticket-check', name: 'Ticket check', definition: {
      nodes: [
        { id: 'start', type: 'start', trigger: { kind: 'manual' } },
        { id: 'check', type: 'approval', name: 'Check', approvers: { users: ['dan'] }, form: { kind: 'components', fields: [
          { id: 'ticket', type: 'input', label: 'Ticket', field: 'check.ticket', required: true },
        ] } },
        { id: 'end', type: 'end' },
      ],
      edges: [{ from: 'start', to: 'check' }, { from: 'check', to: 'end' }],
    } })
    await call('POST', '/templates/ticket-check/publish', adminToken)
    const inst = await call('POST', '/instances', adminToken, { template: 'ticket-check', context: {} })
    expect(inst.title === 'Ticket check', `an instance started without a title is titled by its template's name, not ${inst.title}`)
    const task = inst.tasks?.find((t) => t.status === 'pending') ?? (await call('GET', `/instances/${inst.id}`, adminToken)).tasks.find((t) => t.status === 'pending')
    ticketTask = task.id
    ticketInstance = inst.id
    await login('dan', 'dan-pw-12345', { viewport: { width: 390, height: 844 } })
    // A notification links the desktop page: the router takes a phone to the phone page.
    await page.goto(`${base}/tasks/${task.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${task.id}`)
    const ticket = page.locator('[data-field="check.ticket"]')
    await ticket.waitFor()
    expect((await page.locator('.van-field__error-message').count()) === 0, 'an untouched form already shows errors')
    await ticket.locator('input').fill('T-1')
    await ticket.locator('input').fill('')
    expect((await page.locator('.van-field__error-message').count()) === 0, 'a field typed in and cleared again shows an error before approve')
    await page.click('[data-test=approve]')
    await page.locator('[data-test=action-popup]').waitFor()
    await page.click('[data-test=confirm]')
    await ticket.locator('.van-field__error-message').waitFor()
    expect(/Ticket/.test(await ticket.locator('.van-field__error-message').innerText()), 'the error names the field')
  })

  await step('a desktop approver takes the same path: the error once they press approve, then their field is sent — by keyboard alone', async () => {
    await login('dan', 'dan-pw-12345')
    await page.goto(`${base}/tasks/${ticketTask}`)
    const ticket = page.locator('[data-field="check.ticket"]')
    await ticket.waitFor()
    expect((await ticket.locator('.el-form-item__error').count()) === 0, 'an untouched form already shows errors')
    await page.click('[data-test=approve]')
    await page.click('[data-test=confirm]')
    await ticket.locator('.el-form-item__error').waitFor()
    expect(/Ticket/.test(await page.locator('.el-dialog .el-form-item__error').innerText()), 'the dialog does not say what is missing')
    await page.keyboard.press('Escape')
    await ticket.locator('input').fill('T-2')
    // By keyboard alone: from the field back to Approve, Enter, then forward to the dialog's confirm, Enter.
    const tabTo = async (selector, key) => {
      for (let i = 0; i < 150; i++) {
        if (await page.evaluate((sel) => !!document.activeElement?.closest(sel), selector)) return
        await page.keyboard.press(key)
      }
      throw new Error(`${selector} is not reached with ${key}`)
    }
    await tabTo('[data-test=approve]', 'Shift+Tab')
    await page.keyboard.press('Enter')
    await page.locator('[data-test=confirm]').waitFor()
    await tabTo('[data-test=confirm]', 'Tab')
    await page.keyboard.press('Enter')
    await page.locator('[data-test=task-status]').getByText('approved').waitFor()
    const after = await call('GET', `/instances/${ticketInstance}`, adminToken)
    expect(after.context?.check?.ticket === 'T-2', `context after approve: ${JSON.stringify(after.context)}`)
  })

  await step('out of office: the delegate\'s inbox marks a task on behalf of the delegator and an urged one; the delegator removes the delegation', async () => {
    for (const u of [{ username: 'erin', display_name: 'Erin Applicant' }, { username: 'finn', display_name: 'Finn Away' }, { username: 'gwen', display_name: 'Gwen Deputy' }]) {
      // password_change_required false: service accounts for this step (where the server knows the field yet).
      const body = { ...u, password: `${u.username}-pw-12345`, roles: [] }
      const r = await raw('POST', '/users', adminToken, { ...body, password_change_required: false })
      if (!r.ok) await call('POST', '/users', adminToken, body)
    }
    const now = Date.now()
    await call('POST', '/delegations', adminToken, { from: 'finn', to: 'gwen', starts_at: new Date(now - 60000).toISOString(), ends_at: new Date(now + 3600000).toISOString(), reason: 'holiday' })
    await call('POST', '/templates', adminToken, { key: 'away-check', name: 'Away check', definition: {
      nodes: [{ id: 'start', type: 'start', trigger: { kind: 'manual' } }, { id: 'n', type: 'approval', name: 'Check', approvers: { users: ['finn'] } }, { id: 'end', type: 'end' }],
      edges: [{ from: 'start', to: 'n' }, { from: 'n', to: 'end' }],
    } })
    await call('POST', '/templates/away-check/publish', adminToken)
    const erinToken = (await call('POST', '/auth/login', undefined, { username: 'erin', password: 'erin-pw-12345' })).token
    const inst = await call('POST', '/instances', erinToken, { template: 'away-check', title: 'Away trip' })
    // The initiator urges from the request's page.
    await login('erin', 'erin-pw-12345')
    await page.goto(`${base}/instances/${inst.id}`)
    await page.click('[data-test=urge]')
    await page.locator('.el-dialog:visible textarea').fill('before Friday please')
    await page.click('[data-test=confirm-move]')
    await page.locator('.el-message--success').waitFor()
    // The delegate sees the task marked: on behalf of Finn, urged.
    await login('gwen', 'gwen-pw-12345')
    await page.goto(`${base}/`)
    const row = page.locator('[data-test=inbox] tr', { hasText: 'Away trip' })
    await row.locator('[data-test=inbox-delegated]').waitFor()
    expect(/on behalf of Finn Away/.test(await row.locator('[data-test=inbox-delegated]').innerText()), 'the delegated mark does not name Finn')
    await row.locator('[data-test=inbox-urged]').waitFor()
    await page.screenshot({ path: join(artifacts, 'inbox-delegated-urged.png') })
    // The phone inbox marks it too.
    await login('gwen', 'gwen-pw-12345', { viewport: { width: 390, height: 844 } })
    await page.goto(`${base}/m/inbox`)
    await page.locator('[data-test=inbox-delegated]').first().waitFor()
    await page.locator('[data-test=inbox-urged]').first().waitFor()
    // The delegator sees the delegation on their profile and removes it.
    await login('finn', 'finn-pw-12345')
    await page.goto(`${base}/profile`)
    const d = page.locator('[data-test=delegation]', { hasText: 'gwen' })
    await d.waitFor()
    await d.locator('[data-test=delegation-remove]').click()
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('[data-test=delegation]').first().waitFor({ state: 'detached' })
    const left = await call('GET', '/delegations?user=finn', adminToken)
    expect((left.items ?? []).length === 0, `delegations left: ${JSON.stringify(left)}`)
  })

  // Accessibility (issue 32): axe-core's WCAG 2.1 A/AA rules find no serious or critical violation on the pages,
  // in both languages, at desktop and phone widths. axe is evaluated through the DevTools protocol, which the page's
  // Content-Security-Policy does not govern: no script is added to the page.
  await step('axe-core finds no serious or critical WCAG 2.1 A/AA violation, zh-CN and en, desktop and phone', async () => {
    const pages = ['/login', '/inbox', '/start', '/requests', '/cc', '/profile', '/admin/templates', '/admin/users', '/admin/plugins', '/admin/instances', '/m/inbox', '/m/profile']
    const found = []
    for (const language of ['zh-CN', 'en']) {
      await call('PUT', '/me', adminToken, { language })
      for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
        await page.setViewportSize(viewport)
        for (const path of pages) {
          await page.goto(`${base}/login`)
          await page.evaluate(([token, lang, signedIn]) => {
            localStorage.setItem('halley.language', lang)
            if (signedIn) localStorage.setItem('halley.token', token)
            else localStorage.removeItem('halley.token')
          }, [adminToken, language, path !== '/login'])
          await page.goto(`${base}${path}`)
          found.push(...(await axeCheck(`${language} ${path}`)))
        }
      }
    }
    await call('PUT', '/me', adminToken, { language: 'en' })
    await page.setViewportSize({ width: 1440, height: 900 })
    expect(found.length === 0, `axe violations:\n${found.join('\n')}`)
  })

  // (issue 28) The API reference renders the OpenAPI document with the bundled renderer, under the app's CSP.
  await step('the API reference page renders every area of the OpenAPI document', async () => {
    await page.goto(`${base}/api/docs`)
    await page.locator('.swagger-ui .info .title').getByText('Halley BPM API').waitFor()
    for (const tag of ['instances', 'tasks', 'templates', 'people', 'operations']) {
      await page.locator(`.opblock-tag[data-tag="${tag}"]`).waitFor()
    }
    await page.locator('.opblock-summary-path[data-path="/api/v1/instances/{id}"]').first().waitFor()
    const scripts = await page.evaluate(() => [...document.scripts].map((x) => x.src).filter((src) => src && !src.startsWith(location.origin)))
    expect(scripts.length === 0, `scripts from elsewhere: ${scripts.join(', ')}`)
  })

  // Issue 32: the people's walk (e2e/people.mjs), in both languages.
  for (const lang of ['zh-CN', 'en']) {
    await peopleWalk(lang, { step, call, raw, login, expect, page: () => page, base, adminToken, adminPassword: ADMIN_PASSWORD, publishTemplate, pickOption, axeCheck })
  }

  await step('no Content-Security-Policy violation in the whole run', async () => {
    const unexpected = cspViolations.filter((v) => !v.expected)
    expect(unexpected.length === 0, `CSP violations: ${unexpected.map((v) => v.text).join(' | ')}`)
  })
} catch (e) {
  if (!(e instanceof StopError)) {
    results.push({ name: 'runner', ok: false, error: e })
    console.log(`FAIL runner: ${e?.stack ?? e}`)
  }
} finally {
  await cleanup()
}

const passed = results.filter((r) => r.ok).length
const failed = results.filter((r) => !r.ok).length
for (const r of results.filter((x) => !x.ok)) console.error(`\n${r.name}:\n${r.error?.stack ?? r.error}`)
if (failed) console.log(`\nscreenshots and logs: ${artifacts}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
