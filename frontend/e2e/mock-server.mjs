// A stand-in for the Halley server, for UI development and for rehearsing the end-to-end scenario while the Go
// backend is being built. It implements just enough of ../shared/API.md, in memory: users and login, templates
// (draft, validate, publish, versions), a naive engine (sequential activation, `or` approval, auto/end nodes,
// no joins, no timers), tasks, forms, conditions (a subset of operators), history and Mermaid diagrams. It also
// serves frontend/dist with the history-mode fallback, like the real server.
//
// It is NOT the contract: when it and API.md disagree, API.md wins. CI never uses it.
//
//   node e2e/mock-server.mjs            # http://127.0.0.1:8080, admin password "admin"
//   HALLEY_ADDR=127.0.0.1:9000 HALLEY_ADMIN_PASSWORD=x node e2e/mock-server.mjs
import { createServer } from 'node:http'
import { readFile, stat } from 'node:fs/promises'
import { extname, join, normalize } from 'node:path'
import { randomUUID } from 'node:crypto'

const [host, port] = (process.env.HALLEY_ADDR || '127.0.0.1:8080').split(':')
const dist = new URL('../dist/', import.meta.url).pathname
const now = () => new Date().toISOString()

const users = new Map([['admin', { username: 'admin', password: process.env.HALLEY_ADMIN_PASSWORD || 'admin', display_name: 'Administrator', roles: ['admin'], department: '', manager: '' }]])
const tokens = new Map()
const templates = new Map()
const instances = new Map()
const tasks = new Map()

class HttpError extends Error {
  constructor(status, code, message, details) {
    super(message)
    Object.assign(this, { status, code, details })
  }
}
const fail = (status, code, message, details) => {
  throw new HttpError(status, code, message, details)
}
const publicUser = ({ password: _p, ...u }) => u

// ---- conditions (subset) ----
function get(obj, path) {
  return path.split('.').reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj)
}
function matchOp(v, op, arg) {
  switch (op) {
    case '$eq': return v === arg
    case '$ne': return v !== arg
    case '$gt': return typeof v === typeof arg && v > arg
    case '$gte': return typeof v === typeof arg && v >= arg
    case '$lt': return typeof v === typeof arg && v < arg
    case '$lte': return typeof v === typeof arg && v <= arg
    case '$in': if (!Array.isArray(arg)) fail(400, 'bad_condition', '$in needs an array'); return arg.includes(v)
    case '$nin': if (!Array.isArray(arg)) fail(400, 'bad_condition', '$nin needs an array'); return !arg.includes(v)
    case '$exists': return (v !== undefined) === !!arg
    default: fail(400, 'bad_condition', `unknown operator ${op}`)
  }
}
function evaluate(cond, ctx) {
  if (!cond || typeof cond !== 'object' || Array.isArray(cond)) fail(400, 'bad_condition', 'a condition is a JSON object')
  return Object.entries(cond).every(([k, v]) => {
    if (k === '$and') return v.every((c) => evaluate(c, ctx))
    if (k === '$or') return v.some((c) => evaluate(c, ctx))
    if (k.startsWith('$')) fail(400, 'bad_condition', `unknown operator ${k}`)
    const val = get(ctx, k)
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).some((x) => x.startsWith('$'))) {
      return Object.entries(v).every(([op, arg]) => matchOp(val, op, arg))
    }
    return JSON.stringify(val) === JSON.stringify(v)
  })
}

// ---- validation (subset) ----
function validate(def) {
  const errors = []
  const nodes = def?.nodes ?? []
  const edges = def?.edges ?? []
  const ids = new Set()
  for (const n of nodes) {
    if (ids.has(n.id)) errors.push({ code: 'duplicate_id', message: `two nodes have the id ${n.id}`, nodes: [n.id] })
    ids.add(n.id)
  }
  const starts = nodes.filter((n) => n.type === 'start')
  if (!starts.length) errors.push({ code: 'no_start', message: 'the template has no start node', nodes: [] })
  if (starts.length > 1) errors.push({ code: 'multiple_starts', message: 'more than one start node', nodes: starts.map((n) => n.id) })
  if (!nodes.some((n) => n.type === 'end' || n.type === 'terminate')) errors.push({ code: 'no_end', message: 'the template has no end node', nodes: [] })
  for (const e of edges) {
    for (const end of [e.from, e.to]) if (!ids.has(end)) errors.push({ code: 'unknown_node', message: `an edge names the missing node ${end}`, nodes: [end] })
    if (e.condition) {
      try {
        evaluate(e.condition, {})
      } catch (err) {
        errors.push({ code: 'bad_condition', message: `${e.from} → ${e.to}: ${err.message}`, nodes: [e.from, e.to] })
      }
    }
  }
  for (const n of nodes) {
    if (n.type === 'approval' && !Object.keys(n.approvers ?? {}).length) errors.push({ code: 'bad_node', message: `approval ${n.id} has no approvers`, nodes: [n.id] })
    if (n.type !== 'start' && n.type !== 'error' && !edges.some((e) => e.to === n.id)) errors.push({ code: 'unreachable', message: `${n.id} is not reachable from the start`, nodes: [n.id] })
    if (!['end', 'terminate'].includes(n.type) && !edges.some((e) => e.from === n.id)) errors.push({ code: 'dead_end', message: `${n.id} cannot reach an end`, nodes: [n.id] })
  }
  // cycles
  const state = new Map()
  const stack = []
  const visit = (id) => {
    state.set(id, 1)
    stack.push(id)
    for (const e of edges.filter((x) => x.from === id)) {
      if (state.get(e.to) === 1) errors.push({ code: 'cycle', message: 'the graph has a cycle', nodes: stack.slice(stack.indexOf(e.to)) })
      else if (!state.get(e.to) && ids.has(e.to)) visit(e.to)
    }
    stack.pop()
    state.set(id, 2)
  }
  for (const n of nodes) if (!state.get(n.id)) visit(n.id)
  return { valid: errors.length === 0, errors }
}

// ---- a naive engine ----
function history(inst, actor, action, extra = {}) {
  inst.history.push({ at: now(), actor, action, comment: '', data: {}, ...extra })
}
function approversOf(n, inst) {
  const a = n.approvers ?? {}
  const out = new Set(a.users ?? [])
  for (const r of a.roles ?? []) for (const u of users.values()) if (u.roles.includes(r)) out.add(u.username)
  if (a.relation === 'initiator.manager') out.add(users.get(inst.initiator)?.manager)
  if (a.context) [get(inst.context, a.context)].flat().forEach((u) => u && out.add(u))
  return [...out].filter(Boolean)
}
function setNode(inst, n, state) {
  let ns = inst.nodes.find((x) => x.node_id === n.id)
  if (!ns) inst.nodes.push((ns = { node_id: n.id, name: n.name ?? n.id, type: n.type, state, started_at: now(), ended_at: null }))
  ns.state = state
  if (state !== 'active') ns.ended_at = now()
}
function activate(inst, id) {
  const def = inst.definition
  const n = def.nodes.find((x) => x.id === id)
  if (n.type === 'approval') {
    setNode(inst, n, 'active')
    history(inst, 'system', 'node.activated', { node_id: n.id })
    for (const u of approversOf(n, inst)) {
      const t = { id: randomUUID(), instance_id: inst.id, node_id: n.id, node_name: n.name ?? n.id, assignee: u, status: 'pending', comment: '', created_at: now(), decided_at: null }
      tasks.set(t.id, t)
      history(inst, 'system', 'task.created', { node_id: n.id, task_id: t.id, data: { assignee: u } })
    }
    return
  }
  setNode(inst, n, 'completed')
  history(inst, 'system', 'node.completed', { node_id: n.id })
  if (n.type === 'end' || n.type === 'terminate') {
    if (!inst.nodes.some((x) => x.state === 'active')) {
      inst.status = n.type === 'end' ? 'completed' : 'terminated'
      inst.ended_at = now()
      history(inst, 'system', `instance.${inst.status}`)
    }
    return
  }
  advance(inst, n.id)
}
function advance(inst, fromId) {
  const out = inst.definition.edges.filter((e) => e.from === fromId)
  const taken = out.filter((e) => !e.default && (!e.condition || evaluate(e.condition, inst.context)))
  const next = taken.length ? taken : out.filter((e) => e.default)
  if (!next.length) {
    inst.status = 'rejected'
    inst.ended_at = now()
    history(inst, 'system', 'instance.rejected')
  }
  for (const e of next) activate(inst, e.to)
}
function startInstance(tpl, version, context, initiator, title) {
  const v = tpl.versions[version - 1] ?? fail(404, 'not_found', `version ${version} not found`)
  const inst = { id: randomUUID(), template: tpl.key, version, title: title || `${tpl.name} by ${initiator}`, status: 'running', initiator, correlation_id: '', context, created_at: now(), ended_at: null, nodes: [], definition: v.definition, history: [] }
  instances.set(inst.id, inst)
  history(inst, initiator, 'instance.started')
  activate(inst, v.definition.nodes.find((n) => n.type === 'start').id)
  return inst
}
const instanceOut = ({ definition: _d, history: _h, ...i }) => ({ ...i, tasks: [...tasks.values()].filter((t) => t.instance_id === i.id) })
// Mermaid ids are prefixed: a node may be called "end", a Mermaid keyword.
const mid = (id) => `n_${String(id).replace(/[^A-Za-z0-9_]/g, '_')}`
function diagram(def, inst) {
  const lines = ['flowchart TD']
  for (const n of def.nodes) {
    const label = JSON.stringify(n.name ?? n.id)
    lines.push(n.type === 'start' || n.type === 'end' ? `  ${mid(n.id)}([${label}])` : `  ${mid(n.id)}[${label}]`)
  }
  for (const e of def.edges) lines.push(e.condition ? `  ${mid(e.from)} -->|${JSON.stringify(JSON.stringify(e.condition).replace(/"/g, "'"))}| ${mid(e.to)}` : `  ${mid(e.from)} --> ${mid(e.to)}`)
  for (const ns of inst?.nodes ?? []) lines.push(`  class ${mid(ns.node_id)} ${ns.state}`)
  return lines.join('\n')
}

// ---- HTTP ----
async function body(req) {
  const chunks = []
  for await (const c of req) chunks.push(c)
  const text = Buffer.concat(chunks).toString()
  if (!text) return {}
  try {
    return JSON.parse(text)
  } catch {
    fail(400, 'invalid_json', 'the body is not valid JSON')
  }
}
function auth(req) {
  const t = (req.headers.authorization || '').replace(/^Bearer /, '')
  const u = tokens.get(t)
  if (!u) fail(401, 'unauthorized', 'sign in first')
  return users.get(u)
}
const admin = (u) => (u.roles.includes('admin') ? u : fail(403, 'forbidden', 'admins only'))
const tplOut = (t) => ({ key: t.key, name: t.name, description: t.description, draft: { definition: t.draft, validation: validate(t.draft) }, latest_version: t.versions.length || null, versions: t.versions.map((v) => ({ version: v.version, published_at: v.published_at, published_by: v.published_by })) })

async function api(req, url) {
  const m = req.method
  const p = url.pathname.replace(/^\/api\/v1/, '')
  const seg = p.split('/').filter(Boolean).map(decodeURIComponent)
  if (m === 'POST' && p === '/auth/login') {
    const b = await body(req)
    const u = users.get(b.username)
    if (!u || u.password !== b.password) fail(401, 'bad_credentials', 'wrong username or password')
    const token = randomUUID()
    tokens.set(token, u.username)
    return [200, { token, user: publicUser(u) }]
  }
  const me = auth(req)
  if (m === 'GET' && p === '/me') return [200, { ...publicUser(me), tenant: 'default' }]
  if (p === '/users') {
    if (m === 'GET') return [200, { items: [...users.values()].map(publicUser), next_cursor: '' }]
    admin(me)
    const b = await body(req)
    if (users.has(b.username)) fail(409, 'user_exists', `user ${b.username} exists`)
    const u = { username: b.username, password: b.password, display_name: b.display_name ?? '', roles: b.roles ?? [], department: b.department ?? '', manager: b.manager ?? '' }
    users.set(u.username, u)
    return [201, publicUser(u)]
  }
  if (m === 'GET' && p === '/departments') return [200, { items: [] }]
  if (p === '/templates' && m === 'GET') return [200, { items: [...templates.values()].map((t) => ({ key: t.key, name: t.name, description: t.description, latest_version: t.versions.length || null })) }]
  if (p === '/templates' && m === 'POST') {
    admin(me)
    const b = await body(req)
    if (templates.has(b.key)) fail(409, 'template_exists', `template ${b.key} exists`)
    const t = { key: b.key, name: b.name, description: b.description ?? '', draft: b.definition ?? { nodes: [], edges: [] }, versions: [] }
    templates.set(t.key, t)
    return [201, tplOut(t)]
  }
  if (p === '/templates/validate' && m === 'POST') return [200, validate((await body(req)).definition)]
  if (p === '/conditions/evaluate' && m === 'POST') {
    const b = await body(req)
    return [200, { result: evaluate(b.condition, b.context ?? {}) }]
  }
  if (seg[0] === 'templates') {
    const t = templates.get(seg[1]) ?? fail(404, 'not_found', `template ${seg[1]} not found`)
    if (seg.length === 2 && m === 'GET') return [200, tplOut(t)]
    if (seg[2] === 'draft' && m === 'PUT') {
      admin(me)
      t.draft = (await body(req)).definition
      return [200, tplOut(t)]
    }
    if (seg[2] === 'publish' && m === 'POST') {
      admin(me)
      const v = validate(t.draft)
      if (!v.valid) fail(422, 'invalid_definition', 'the draft is invalid', { errors: v.errors })
      t.versions.push({ version: t.versions.length + 1, definition: structuredClone(t.draft), published_at: now(), published_by: me.username })
      return [201, { key: t.key, version: t.versions.length }]
    }
    if (seg[2] === 'versions') {
      const v = t.versions[Number(seg[3]) - 1] ?? fail(404, 'not_found', 'no such version')
      if (seg[4] === 'diagram') return [200, diagram(v.definition), 'text/plain']
      return [200, { key: t.key, ...v }]
    }
  }
  if (seg[0] === 'forms') {
    const t = templates.get(seg[1]) ?? fail(404, 'not_found', `template ${seg[1]} not found`)
    const v = t.versions.at(-1) ?? fail(404, 'not_found', 'not published')
    const trig = v.definition.nodes.find((n) => n.type === 'start')?.trigger
    if (trig?.kind !== 'form') fail(404, 'not_a_form', 'this template does not start from a form')
    if (trig.members?.length && !trig.members.includes(me.username)) fail(403, 'forbidden', 'you may not submit this form')
    if (m === 'GET') return [200, { template: t.key, name: t.name, form: trig.form, members: trig.members ?? [], require_login: trig.require_login ?? true }]
    return [201, instanceOut(startInstance(t, v.version, await body(req), me.username))]
  }
  if (p === '/instances' && m === 'POST') {
    const b = await body(req)
    const t = templates.get(b.template) ?? fail(404, 'not_found', `template ${b.template} not found`)
    return [201, instanceOut(startInstance(t, b.version ?? t.versions.length, b.context ?? {}, me.username, b.title))]
  }
  if (p === '/instances' && m === 'GET') {
    const q = url.searchParams
    const items = [...instances.values()]
      .filter((i) => (!q.get('status') || i.status === q.get('status')) && (!q.get('template') || i.template === q.get('template')) && (!q.get('initiator') || i.initiator === q.get('initiator')))
      .reverse()
      .map(instanceOut)
    return [200, { items, next_cursor: '' }]
  }
  if (seg[0] === 'instances') {
    const inst = instances.get(seg[1]) ?? fail(404, 'not_found', 'instance not found')
    if (seg.length === 2) return [200, instanceOut(inst)]
    if (seg[2] === 'history') return [200, { items: inst.history }]
    if (seg[2] === 'diagram') return [200, diagram(inst.definition, inst), 'text/plain']
    if (seg[2] === 'bookmarks') return [200, { items: [] }]
    if (seg[2] === 'terminate' && m === 'POST') {
      inst.status = 'terminated'
      inst.ended_at = now()
      for (const t of tasks.values()) if (t.instance_id === inst.id && t.status === 'pending') t.status = 'cancelled'
      history(inst, me.username, 'instance.terminated', { comment: (await body(req)).reason })
      return [200, instanceOut(inst)]
    }
  }
  if (p === '/tasks' && m === 'GET') {
    const q = url.searchParams
    const who = !q.get('assignee') || q.get('assignee') === 'me' ? me.username : q.get('assignee')
    const status = q.get('status') || 'pending'
    return [200, { items: [...tasks.values()].filter((t) => t.assignee === who && t.status === status), next_cursor: '' }]
  }
  if (seg[0] === 'tasks') {
    const t = tasks.get(seg[1]) ?? fail(404, 'not_found', 'task not found')
    if (seg.length === 2) return [200, t]
    if (seg[2] === 'return-targets') return [200, { items: [] }]
    if (t.assignee !== me.username) fail(403, 'forbidden', 'this is not your task')
    if (t.status !== 'pending') fail(409, 'task_already_decided', `the task is ${t.status}`)
    const b = await body(req)
    const inst = instances.get(t.instance_id)
    const n = inst.definition.nodes.find((x) => x.id === t.node_id)
    if (seg[2] === 'approve' || seg[2] === 'reject') {
      if (seg[2] === 'reject' && !b.comment) fail(400, 'comment_required', 'a rejection needs a comment')
      t.status = seg[2] === 'approve' ? 'approved' : 'rejected'
      t.comment = b.comment ?? ''
      t.decided_at = now()
      Object.assign(inst.context, b.data ?? {})
      history(inst, me.username, `task.${t.status}`, { node_id: n.id, task_id: t.id, comment: t.comment })
      for (const o of tasks.values()) if (o.instance_id === inst.id && o.node_id === n.id && o.status === 'pending') o.status = 'cancelled'
      if (t.status === 'approved') {
        setNode(inst, n, 'completed')
        advance(inst, n.id)
      } else {
        setNode(inst, n, 'rejected')
        inst.status = 'rejected'
        inst.ended_at = now()
        history(inst, 'system', 'instance.rejected')
      }
      return [200, t]
    }
    if (seg[2] === 'transfer') {
      t.status = 'transferred'
      const nt = { ...t, id: randomUUID(), assignee: b.to, status: 'pending', created_at: now() }
      tasks.set(nt.id, nt)
      history(inst, me.username, 'task.transferred', { node_id: n.id, task_id: t.id, comment: b.comment, data: { to: b.to } })
      return [200, nt]
    }
  }
  if (m === 'GET' && p === '/plugins') return [200, { items: [] }]
  if (m === 'GET' && p === '/cc') return [200, { items: [] }]
  // The form frame (server/security.go serves the real one, with its own sandbox policy).
  if (m === 'GET' && p === '/ui/form-frame') {
    return [200, `<!doctype html><body><script>addEventListener('message',function(e){if(e.source!==parent||typeof e.data.halleyFormDocument!=='string')return;document.open();document.write(e.data.halleyFormDocument);document.close()});parent.postMessage({halleyFrameReady:true},'*')</script></body>`, 'text/html']
  }
  fail(404, 'not_found', `${m} ${p} is not in the mock`)
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json', '.woff2': 'font/woff2' }

createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x')
  try {
    if (url.pathname === '/readyz' || url.pathname === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok')
      return
    }
    if (url.pathname.startsWith('/api/v1/')) {
      const [status, out, type] = await api(req, url)
      res.writeHead(status, { 'content-type': type ?? 'application/json' }).end(type ? out : JSON.stringify(out))
      return
    }
    let file = normalize(join(dist, url.pathname))
    if (!file.startsWith(dist) || !(await stat(file).catch(() => null))?.isFile()) file = join(dist, 'index.html')
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(await readFile(file))
  } catch (e) {
    const status = e.status ?? 500
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: e.code ?? 'internal', message: e.message, details: e.details ?? {} } }))
  }
}).listen(Number(port), host, () => console.log(`mock Halley on http://${host}:${port}`))
