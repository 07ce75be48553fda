/// <reference types="node" />
// Every text a user reads is a message of en.ts and zh-CN.ts. This test reads the sources the way a translator
// would and fails on English left in them: words in a template's text, in an attribute a user sees (label,
// placeholder, title...), and prose in the string literals of templates and scripts. It also fails on a message
// key used in the code that the messages do not have. What is not for users says so with a comment:
// `i18n-ignore` on its line, or the lines between `i18n-ignore-start` and `i18n-ignore-end`.
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'
import ts from 'typescript'
import { parse as parseSfc } from 'vue/compiler-sfc'
import en from './en'
import { messageKeys } from '@/testing/messages'

const SRC = join(import.meta.dirname, '..')

// Words that read the same in both languages: names, units and abbreviations.
const ALLOWED_WORDS = new Set(['Halley', 'JSON', 'HTML', 'API', 'CSS', 'JavaScript', 'Python', 'IM', 'ID', 'OK', 'CNY', 'KiB', 'MiB', 'Bearer'])

// The attributes of elements and components whose value a user reads.
const VISIBLE_ATTRS = new Set([
  'label', 'placeholder', 'title', 'alt', 'aria-label', 'description', 'header', 'content', 'sub-title', 'text',
  'start-placeholder', 'end-placeholder', 'range-separator', 'left-text', 'right-text', 'cancel-text', 'confirm-button-text',
  'cancel-button-text', 'no-data-text', 'no-match-text', 'empty-text', 'loading-text', 'finished-text', 'error-text',
  'active-text', 'inactive-text', 'pulling-text', 'loosing-text', 'success-text', 'error-message', 'button-text',
])

// Elements whose text is code, shown as code.
const CODE_ELEMENTS = new Set(['code', 'pre', 'kbd', 'samp'])

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) return name === 'generated' ? [] : files(p)
    if (!/\.(vue|ts)$/.test(name) || /\.test\.ts$|\.d\.ts$/.test(name)) return []
    // The message files, and the Chinese of the designer's field help (lib/schema.test.ts checks it is complete).
    if (p.startsWith(join(SRC, 'i18n')) && /(^|\/)(en|zh-CN|field-help\.zh-CN)\.ts$/.test(p)) return []
    return [p]
  })
}

/** words are the tokens of a text made of letters only (punctuation around them dropped): what reads as language. */
function words(text: string): string[] {
  if (/^\s*[{[]/.test(text)) return [] // a JSON example
  return text
    .split(/\s+/)
    .map((tok) => tok.replace(/^[(“"'‘[]+|[.,:;!?…)”"'’\]]+$/g, ''))
    .filter((tok) => /^[A-Za-z]{2,}$/.test(tok) && !ALLOWED_WORDS.has(tok))
}

/** isProse: a literal in code that reads as language: two words or more, or one capitalised word. */
function isProse(text: string): boolean {
  const w = words(text)
  return w.length >= 2 || (w.length === 1 && /^[A-Z][a-z]/.test(w[0]) && text.trim().replace(/[.,:;!?…]+$/, '') === w[0])
}

/** ignoredLines are the 1-based lines an i18n-ignore comment covers. */
function ignoredLines(source: string): Set<number> {
  const out = new Set<number>()
  let inBlock = false
  source.split('\n').forEach((line, i) => {
    if (line.includes('i18n-ignore-start')) inBlock = true
    if (inBlock || /i18n-ignore(?!-)/.test(line)) out.add(i + 1)
    if (line.includes('i18n-ignore-end')) inBlock = false
  })
  return out
}

interface Finding {
  file: string
  line: number
  text: string
}

/** literals walks a script (or a template expression) and reports its string literals that read as prose. */
type Literals = (text: string, line: number, prefix: boolean) => void

function scanScript(code: string, file: string, lineOffset: number, report: (f: Finding) => void, literals?: Literals) {
  const sf = ts.createSourceFile('x.ts', code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const ignored = ignoredLines(code)
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node) || ts.isLiteralTypeNode(node)) return
    let text: string | undefined
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) text = node.text
    else if (ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) text = node.text
    if (text !== undefined) {
      const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1
      literals?.(text, line + lineOffset, ts.isTemplateHead(node))
      // A property name, or a value compared with (=== 'Node', case 'Node':), is code, never shown.
      const compared =
        (ts.isBinaryExpression(node.parent) && [ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken, ts.SyntaxKind.EqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsToken].includes(node.parent.operatorToken.kind)) ||
        ts.isCaseClause(node.parent)
      const isKey = (ts.isPropertyAssignment(node.parent) && node.parent.name === node) || compared
      // In a template string one word beside a value reads as language too: `file ${n}`.
      const beside = (ts.isTemplateHead(node) || ts.isTemplateMiddle(node)) && /\s$/.test(text) || (ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) && /^\s/.test(text)
      if (!isKey && !ignored.has(line) && (isProse(text) || (beside && words(text).length > 0))) report({ file, line: line + lineOffset, text })
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
}

// Vue template AST node types (@vue/compiler-core NodeTypes).
const ELEMENT = 1
const TEXT = 2
const INTERPOLATION = 5
const ATTRIBUTE = 6
const DIRECTIVE = 7

interface TemplateNode {
  type: number
  tag?: string
  content?: string | { content: string }
  props?: { type: number; name: string; value?: { content: string }; exp?: { content: string }; loc: { start: { line: number } } }[]
  children?: TemplateNode[]
  loc: { start: { line: number } }
}

function scanTemplate(root: TemplateNode, file: string, report: (f: Finding) => void, literals: Literals, source: string) {
  const ignored = ignoredLines(source)
  const expr = (code: string, line: number) => scanScript(code, file, line - 1, (f) => !ignored.has(f.line) && report(f), literals)
  const walk = (n: TemplateNode, inCode: boolean) => {
    const line = n.loc.start.line
    if (n.type === TEXT && !inCode && typeof n.content === 'string' && !ignored.has(line)) {
      const w = words(n.content)
      if (w.length) report({ file, line, text: n.content.trim() })
    }
    if (n.type === INTERPOLATION && typeof n.content === 'object') expr(n.content.content, line)
    if (n.type === ELEMENT) {
      for (const p of n.props ?? []) {
        if (p.type === ATTRIBUTE && VISIBLE_ATTRS.has(p.name) && p.value && !ignored.has(p.loc.start.line) && words(p.value.content).length) {
          report({ file, line: p.loc.start.line, text: `${p.name}="${p.value.content}"` })
        }
        if (p.type === DIRECTIVE && p.exp) {
          // v-for's "item in list" and slot props are not statements; their right side is.
          const code = p.name === 'for' ? p.exp.content.replace(/^.*?\s(in|of)\s/, '') : p.name === 'slot' ? '' : p.exp.content
          expr(code, p.loc.start.line)
        }
        if (p.type === ATTRIBUTE && p.name === 'keypath' && p.value) literals(p.value.content, p.loc.start.line, false)
      }
    }
    for (const c of n.children ?? []) walk(c, inCode || (n.type === ELEMENT && CODE_ELEMENTS.has(n.tag ?? '')))
  }
  walk(root, false)
}

const KEYS = messageKeys(en)
const SECTIONS = Object.keys(en)
const KEY_LIKE = new RegExp(`^(${SECTIONS.join('|')})\\.[A-Za-z0-9_.-]*$`)

/** badKey: a literal that looks like a message key ("task.history"), or the start of one before a ${code}
 * ("status."), that no message has. */
function badKey(text: string, prefix: boolean): boolean {
  if (!KEY_LIKE.test(text)) return false
  if (prefix) return !KEYS.some((k) => k.startsWith(text))
  return !KEYS.includes(text) && !KEYS.some((k) => k.startsWith(text + '.'))
}

function scanAll() {
  const untranslated: Finding[] = []
  const unknownKeys: Finding[] = []
  for (const path of files(SRC)) {
    const file = relative(SRC, path)
    const source = readFileSync(path, 'utf8')
    const report = (f: Finding) => untranslated.push(f)
    const ignored = ignoredLines(source)
    const literals: Literals = (text, line, prefix) => !ignored.has(line) && badKey(text, prefix) && unknownKeys.push({ file, line, text })
    if (path.endsWith('.ts')) {
      scanScript(source, file, 0, report, literals)
      continue
    }
    const { descriptor } = parseSfc(source, { filename: path })
    for (const block of [descriptor.script, descriptor.scriptSetup]) {
      if (block) scanScript(block.content, file, block.loc.start.line - 1, report, literals)
    }
    if (descriptor.template?.ast) scanTemplate(descriptor.template.ast as unknown as TemplateNode, file, report, literals, source)
  }
  return { untranslated, unknownKeys }
}

const show = (fs: Finding[]) => fs.map((f) => `${f.file}:${f.line}: ${JSON.stringify(f.text)}`)

describe('the sources', () => {
  const { untranslated, unknownKeys } = scanAll()

  it('hold no English a user reads outside the messages', () => {
    expect(show(untranslated)).toEqual([])
  })

  it('use only message keys the messages have', () => {
    expect(show(unknownKeys)).toEqual([])
  })
})

describe('the scanner', () => {
  const scan = (name: string, source: string) => {
    const found: Finding[] = []
    const keys: Finding[] = []
    const lit: Literals = (text, line, prefix) => badKey(text, prefix) && keys.push({ file: name, line, text })
    if (name.endsWith('.ts')) scanScript(source, name, 0, (f) => found.push(f), lit)
    else {
      const { descriptor } = parseSfc(source, { filename: name })
      if (descriptor.scriptSetup) scanScript(descriptor.scriptSetup.content, name, 0, (f) => found.push(f), lit)
      scanTemplate(descriptor.template!.ast as unknown as TemplateNode, name, (f) => found.push(f), lit, source)
    }
    return { found: found.map((f) => f.text), keys: keys.map((f) => f.text) }
  }

  it('finds English in text, visible attributes, expressions and scripts', () => {
    const { found } = scan(
      'x.vue',
      `<script setup lang="ts">
const a = 'Approve'
const b = \`Moved to \${x}\`
const b2 = \`file \${i + 1}\`
const c = { approve: 'Take it back' }
notify(cond ? 'Saved' : 'draft')
</script>
<template>
  <div>Back to inbox</div>
  <el-input placeholder="Search processes" />
  <el-button :title="ok ? 'No earlier step' : ''">{{ t('common.refresh') }}</el-button>
  <span>{{ x ? 'Done' : 'running' }}</span>
</template>`,
    )
    expect(found).toEqual(['Approve', 'Moved to ', 'file ', 'Take it back', 'Saved', 'Back to inbox', 'placeholder="Search processes"', 'No earlier step', 'Done'])
  })

  it('leaves codes, keys, code elements, names and ignored lines alone', () => {
    const { found } = scan(
      'y.vue',
      `<script setup lang="ts">
import { api } from '@/api'
const kind: 'approve' | 'reject' = 'approve'
if (type === 'Definition' || x !== 'Node') go()
switch (k) { case 'Trigger': break }
const url = \`/api/v1/tasks/\${id}\`
const css = 'fill:#dafbe1,stroke:#1a7f37'
const auth = \`Bearer \${token}\`
throw new Error('not a base64 data: URL') // i18n-ignore: a developer error
</script>
<template>
  <code>and</code>
  <el-table-column label="sha256" />
  <el-input placeholder="leave-request" />
  <span class="mono">{{ row.key }} · v{{ row.version }}</span>
  <el-tag :type="s === 'approved' ? 'success' : 'danger'">Halley</el-tag>
</template>`,
    )
    expect(found).toEqual([])
  })

  it('finds keys the messages do not have', () => {
    const { keys } = scan('z.ts', `t('common.refresh'); t('common.refrsh'); t(\`status.\${s}\`); t(\`http.s\${n}\`); t(\`status.nope\${s}\`); const k = 'task.nope'`)
    expect(keys).toEqual(['common.refrsh', 'status.nope', 'task.nope'])
  })
})
