// Screenshots of the main pages for docs/ui.md (issue 32), in both languages at 1280×800 and 390×844:
//
//   make build && cd frontend && HALLEY_BIN=$PWD/../bin/halley npm run screenshots
//
// It starts a Halley of its own (embedded SQLite in a temporary directory, like the e2e test), loads the ready-made
// templates (`halley templates load`), creates people and requests through the API — pending, approved, returned,
// copied (CC) and a task of a disabled approver, each in the language of the people it belongs to — and captures
// login, inbox, task, request (timeline), start form, resubmit, designer (business view and canvas), admin
// attention and notifications into docs/ui/<page>.<lang>.<width>x<height>.png. Not part of `make test`.
//
// Deterministic: fixed people, texts and a fixed 2×2 photo; the values of the start forms come from the templates'
// own forms (sampleValue below), so the script keeps working when the ready-made templates change. Dates and ids
// are the server's. Chinese text needs a CJK font (Debian: fonts-wqy-microhei or fonts-noto-cjk).
import { spawn, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, createWriteStream } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const OUT = resolve(process.env.HALLEY_SCREENSHOTS_DIR || join(here, '..', '..', 'docs', 'ui'))
const CHROMIUM = process.env.HALLEY_E2E_CHROMIUM || '/usr/bin/chromium'
const BIN = process.env.HALLEY_BIN ? resolve(process.env.HALLEY_BIN) : ''
const ADMIN_PASSWORD = 'screenshots-admin'
const PW = 'screenshots-pw-1'
const LANGS = ['zh-CN', 'en']
const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
]
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==', 'base64')

if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing (apt-get install -y chromium)`)
if (!BIN || !existsSync(BIN)) throw new Error(`set HALLEY_BIN to the halley binary (got ${JSON.stringify(process.env.HALLEY_BIN ?? '')})`)

// The people of each language: an applicant, their team lead (manager), the department leader, HR (copied on
// approved leave) and a lead who has left (disabled, with a task still waiting: the admin's attention page).
const PEOPLE = {
  'zh-CN': {
    applicant: { username: 'wangfang', display_name: '王芳', department: '市场部' },
    lead: { username: 'liqiang', display_name: '李强' },
    head: { username: 'zhaomin', display_name: '赵敏' },
    hr: { username: 'chenjing', display_name: '陈静', roles: ['hr'] },
    gone: { username: 'sunhao', display_name: '孙浩' },
    other: { username: 'zhouyu', display_name: '周宇' },
    department: '市场部',
    texts: { reason: ['回老家参加婚礼', '孩子生病需要照顾', '年假，出去旅行', '搬家'], why: '请补充工作交接安排', ok: '同意，注意交接', edited: '（已补充：工作由周宇代理）' },
  },
  en: {
    applicant: { username: 'emma', display_name: 'Emma Stone', department: 'Marketing' },
    lead: { username: 'david', display_name: 'David Lee' },
    head: { username: 'grace', display_name: 'Grace Hall' },
    hr: { username: 'henry', display_name: 'Henry Ford', roles: ['hr'] },
    gone: { username: 'oscar', display_name: 'Oscar Wild' },
    other: { username: 'lucas', display_name: 'Lucas Gray' },
    department: 'Marketing',
    texts: { reason: ['My sister’s wedding', 'My child is ill', 'Annual leave: a trip', 'Moving house'], why: 'Please say who covers for you', ok: 'Approved, hand over first', edited: ' (Lucas covers for me)' },
  },
}

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

const dataDir = mkdtempSync(join(tmpdir(), 'halley-shots-data-'))
const profileDir = mkdtempSync(join(tmpdir(), 'halley-shots-chromium-'))
const port = await freePort()
const base = `http://127.0.0.1:${port}`
const env = { ...process.env, HALLEY_ADDR: `127.0.0.1:${port}`, HALLEY_DATA_DIR: dataDir, HALLEY_ADMIN_PASSWORD: ADMIN_PASSWORD, HALLEY_LOG_LEVEL: 'warn' }
delete env.HALLEY_DATABASE_URL
delete env.HALLEY_REDIS_URL
delete env.HALLEY_CONFIG
const log = createWriteStream(join(dataDir, 'halley.log'))
const server = spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
server.stdout.pipe(log)
server.stderr.pipe(log)
let browser
async function cleanup() {
  await browser?.close().catch(() => {})
  try {
    process.kill(-server.pid, 'SIGTERM')
  } catch {
    /* gone */
  }
  await new Promise((r) => setTimeout(r, 300))
  rmSync(dataDir, { recursive: true, force: true })
  rmSync(profileDir, { recursive: true, force: true })
}

async function api(method, path, token, body, { form } = {}) {
  const r = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { ...(form ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: form ?? (body === undefined ? undefined : JSON.stringify(body)),
  })
  const text = await r.text()
  if (!r.ok) throw new Error(`${method} ${path} → ${r.status} ${text.slice(0, 300)}`)
  return text ? JSON.parse(text) : undefined
}
const items = (x) => x?.items ?? x ?? []
const login = async (username, password = PW) => (await api('POST', '/auth/login', undefined, { username, password })).token

// sampleValue fills one field of a start form, in the applicant's language (n: which request).
function sampleValue(f, lang, n, photo) {
  const t = PEOPLE[lang].texts
  switch (f.type) {
    case 'number':
    case 'money':
      return [5, 2, 7, 1][n % 4]
    case 'date':
      return `2026-12-${String(7 + n * 3).padStart(2, '0')}`
    case 'date-range':
      return [`2026-12-${String(7 + n * 3).padStart(2, '0')}`, `2026-12-${String(9 + n * 3).padStart(2, '0')}`]
    case 'time':
      return '09:00'
    case 'switch':
      return false
    case 'select':
    case 'radio':
      return f.options?.[0]?.value
    case 'multi-select':
    case 'checkbox':
      return f.options?.length ? [f.options[0].value] : []
    case 'user':
      return PEOPLE[lang].other.username
    case 'image':
    case 'file':
      return photo ? [photo] : undefined
    case 'textarea':
    case 'input':
    default:
      return t.reason[n % t.reason.length]
  }
}

function setPath(obj, path, v) {
  const parts = path.split('.')
  let o = obj
  for (const p of parts.slice(0, -1)) o = o[p] ??= {}
  o[parts.at(-1)] = v
}

// The fields a start form asks: the start trigger's form, else the read-only fields the approvers are shown.
function startFields(def) {
  const start = def.nodes.find((n) => n.type === 'start')
  const own = start?.trigger?.form?.fields
  if (own?.length) return own
  const seen = new Map()
  for (const n of def.nodes) for (const f of n.form?.fields ?? []) if (f.readonly && f.field && f.type !== 'description' && !seen.has(f.field) && !f.field.startsWith(`${n.id}.`)) seen.set(f.field, f)
  return [...seen.values()]
}

// What an approver fills in: the required editable fields of their node's form.
function approveData(def, nodeId, lang) {
  const n = def.nodes.find((x) => x.id === nodeId)
  const data = {}
  for (const f of n?.form?.fields ?? []) if (!f.readonly && f.field && (f.required || f.type === 'switch')) setPath(data, f.field, sampleValue(f, lang, 0))
  return data
}

async function pending(token, instanceId) {
  for (let i = 0; i < 50; i++) {
    const t = items(await api('GET', '/tasks?assignee=me&status=pending', token)).find((x) => x.instance_id === instanceId)
    if (t) return t
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`no pending task of ${instanceId}`)
}

async function waitReady() {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error('halley did not get ready')
}

try {
  await waitReady()
  const admin = await login('admin', ADMIN_PASSWORD)
  execFileSync(BIN, ['templates', 'load', '-url', base, '-user', 'admin', '-password', ADMIN_PASSWORD], { env, stdio: 'pipe' })
  const leave = await api('GET', '/templates/leave/versions/1', admin).catch(async () => {
    const t = await api('GET', '/templates/leave', admin)
    return api('GET', `/templates/leave/versions/${t.latest_version}`, admin)
  })
  const def = leave.definition
  const fields = startFields(def)

  // People and data, per language.
  const data = {}
  for (const lang of LANGS) {
    const p = PEOPLE[lang]
    for (const u of [p.lead, p.head, p.hr, p.gone, p.other]) await api('POST', '/users', admin, { ...u, password: PW, language: lang, department: p.department, password_change_required: false })
    await api('POST', '/departments', admin, { name: p.department, leader: p.head.username })
    await api('POST', '/users', admin, { ...p.applicant, password: PW, language: lang, manager: p.lead.username, password_change_required: false })
    const late = { username: `${p.applicant.username}2`, display_name: `${p.applicant.display_name} (2)`, department: p.department }
    await api('POST', '/users', admin, { ...late, password: PW, language: lang, manager: p.gone.username, password_change_required: false })
    const tok = { applicant: await login(p.applicant.username), lead: await login(p.lead.username), head: await login(p.head.username), late: await login(late.username) }
    const form = new FormData()
    form.append('file', new Blob([PNG], { type: 'image/png' }), 'photo.png')
    const photo = await api('POST', '/attachments', tok.applicant, undefined, { form })

    const start = async (token, n, title) => {
      const ctx = {}
      for (const f of fields) {
        const v = sampleValue(f, lang, n, photo)
        if (v !== undefined) setPath(ctx, f.field, v)
      }
      return api('POST', '/instances', token, { template: 'leave', title, context: ctx })
    }
    // 1. approved by the lead (and the department leader when it goes there): the timeline, HR copied
    const approved = await start(tok.applicant, 0)
    for (const token of [tok.lead, tok.head]) {
      const inst = await api('GET', `/instances/${approved.id}`, admin)
      if (inst.status !== 'running') break
      const t = await pending(token, approved.id).catch(() => undefined)
      if (!t) continue
      await api('POST', `/tasks/${t.id}/approve`, token, { comment: p.texts.ok, data: approveData(def, t.node_id, lang) })
    }
    // 2. pending at the lead: the inbox and the task page
    const waiting = await start(tok.applicant, 1)
    const waitingTask = await pending(tok.lead, waiting.id)
    // 3. returned to the applicant: the resubmit page
    const returned = await start(tok.applicant, 2)
    const rt = await pending(tok.lead, returned.id)
    await api('POST', `/tasks/${rt.id}/return`, tok.lead, { comment: p.texts.why, to: 'start' })
    const resubmit = await pending(tok.applicant, returned.id)
    // 4. waiting for a lead who has left: the admin's attention page
    const stuck = await start(tok.late, 3)
    await pending(await login(p.gone.username), stuck.id)
    await api('PATCH', `/users/${p.gone.username}`, admin, { disabled: true })
    data[lang] = { p, approved, waitingTask, resubmit }
  }

  const { chromium } = await import('playwright-core')
  browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-sync', '--hide-scrollbars'],
    viewport: VIEWPORTS[0],
    deviceScaleFactor: 1,
  })
  browser.setDefaultTimeout(30000)
  const page = browser.pages()[0] ?? (await browser.newPage())
  page.on('dialog', (d) => d.dismiss().catch(() => {}))
  mkdirSync(OUT, { recursive: true })

  const as = async (token, lang) => {
    await page.goto(`${base}/login`)
    await page.evaluate(([t, l]) => {
      localStorage.setItem('halley.language', l)
      if (t) localStorage.setItem('halley.token', t)
      else localStorage.removeItem('halley.token')
    }, [token, lang])
  }
  const settle = async () => {
    await page.waitForLoadState('networkidle')
    await page.evaluate(() => globalThis.document.fonts.ready)
    await page.waitForTimeout(400) // transitions of the menus and messages
  }
  // Each page is also checked with axe-core (WCAG 2.1 A/AA) as it is captured: its serious and critical
  // violations are listed at the end (the e2e test is what fails on them).
  const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
  const violations = []
  const shot = async (name, lang, vp) => {
    await settle()
    const file = join(OUT, `${name}.${lang.toLowerCase()}.${vp.width}x${vp.height}.png`)
    await page.screenshot({ path: file, animations: 'disabled', caret: 'hide' })
    console.log(file)
    await page.evaluate(axeSource)
    const r = await page.evaluate(() => globalThis.axe.run(globalThis.document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }))
    for (const v of r.violations.filter((x) => x.impact === 'serious' || x.impact === 'critical')) {
      violations.push(`${name} ${lang} ${vp.width}px: ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`)
    }
  }

  for (const lang of LANGS) {
    const { p, approved, waitingTask, resubmit } = data[lang]
    await api('PUT', '/me', admin, { language: lang })
    const tok = { applicant: await login(p.applicant.username), lead: await login(p.lead.username), hr: await login(p.hr.username) }
    for (const vp of VIEWPORTS) {
      await page.setViewportSize(vp)
      await as('', lang)
      await page.goto(`${base}/login`)
      await shot('login', lang, vp)

      await as(tok.lead, lang)
      await page.goto(`${base}/inbox`)
      await page.locator('[data-test=inbox-task]').first().waitFor()
      await shot('inbox', lang, vp)

      await page.goto(`${base}/tasks/${waitingTask.id}`)
      await page.locator('[data-test=approve]').waitFor()
      await shot('task', lang, vp)

      await page.goto(`${base}/${vp.width < 600 ? 'm/notifications' : 'inbox'}`)
      await page.waitForLoadState('networkidle')
      if (vp.width >= 600) {
        await page.click('[data-test=notification-bell]')
        await page.locator('[data-test=notification-list]').waitFor()
      }
      await shot('notifications', lang, vp)

      await as(tok.applicant, lang)
      await page.goto(`${base}/instances/${approved.id}`)
      await page.locator('[data-test=timeline-entry]').first().waitFor()
      await shot('request', lang, vp)

      await page.goto(`${base}/start/leave`)
      await page.locator('[data-test=start-form]').waitFor()
      await shot('start', lang, vp)

      await page.goto(`${base}/tasks/${resubmit.id}`)
      await page.locator('[data-test=returned-reason]').waitFor()
      await shot('resubmit', lang, vp)

      await as(tok.hr, lang)
      await page.goto(`${base}/cc`)
      await shot('cc', lang, vp)

      await as(admin, lang)
      await page.goto(`${base}/admin/templates/leave/designer`)
      await page.locator('[data-test=mode-builder]').waitFor()
      await page.click('[data-test=mode-builder]')
      await page.locator('[data-test=builder-node-start]').waitFor()
      await shot('designer-builder', lang, vp)
      await page.click('[data-test=mode-canvas]')
      await page.locator('.vue-flow__node').first().waitFor()
      await shot('designer-canvas', lang, vp)

      await page.goto(`${base}/admin/attention`)
      await shot('attention', lang, vp)
    }
  }
  await api('PUT', '/me', admin, { language: 'en' })
  if (violations.length) console.log(`axe-core: serious or critical violations:\n${violations.join('\n')}`)
  else console.log('axe-core: no serious or critical violation on these pages')
} finally {
  await cleanup()
}
