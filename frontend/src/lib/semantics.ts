// Words for the engine's semantics (joins, node errors, edge states, message start) in both languages the UI
// speaks. The keys follow the shape of the i18n message files (a `semantics` section), so that they can move into
// them as they are; until then the language is chosen the way the i18n setup chooses it: the one chosen on this
// browser (localStorage halley.language), else the browser's own.

export type Lang = 'en' | 'zh-CN'

const en = {
  join: {
    label: 'Join ({n} incoming edges)',
    labelOne: 'Join (1 incoming edge)',
    and: 'All chosen branches',
    or: 'First branch',
    min: 'At least N branches',
    n: 'N',
    andHelp: 'Waits for every branch that routing chose and merges them; branches whose condition was false are left out, and a rejection on a chosen branch stops the node.',
    orHelp: 'Goes on as soon as the first branch arrives; branches that arrive later are absorbed, and a rejection on one branch does not stop it while another can still arrive.',
    minHelp: 'Goes on once N branches have arrived; the later ones are absorbed, and the node is skipped when fewer than N can still arrive.',
  },
  trigger: {
    message: 'Message (a system sends a message)',
    messageName: 'Message name',
    messageHelp: 'POST /api/v1/messages with this name starts one instance: the message data is its data, its correlation id the instance’s. No second instance while one with that correlation id runs.',
  },
  error: {
    title: 'This request failed',
    titleHandled: 'A step failed',
    atStep: 'at step “{node}”',
    code: 'Error code',
    details: 'Details',
    plugin_failed: 'A plugin (an automatic call to another system) failed.',
    plugin_timeout: 'A plugin (an automatic call to another system) did not finish in time.',
    no_approver: 'Nobody could be found to approve this step (the approvers do not exist or are disabled).',
    no_route: 'No way forward: none of the step’s conditions matched the request’s data.',
    callback_timeout: 'The external system did not call back in time.',
    approval_timeout: 'The step was not decided in time.',
    bad_until: 'The waiting time of a delay step could not be read.',
    subprocess_failed: 'A sub-process did not complete.',
    subprocess_depth: 'Sub-processes are nested too deeply.',
    too_many_children: 'A sub-process would start too many child processes.',
    unknown: 'A step failed with error “{code}”.',
  },
  edges: {
    legend: 'Arrows',
    taken: 'taken',
    pruned: 'not chosen (condition false)',
    killed: 'stopped by a rejection or an error',
  },
}

type Messages = typeof en

const zhCN: Messages = {
  join: {
    label: '汇聚方式（{n} 条入线）',
    labelOne: '汇聚方式（1 条入线）',
    and: '所有选中分支',
    or: '第一条分支',
    min: '至少 N 条分支',
    n: 'N',
    andHelp: '等待路由选中的每一条分支到达后合并；条件不成立的分支不计入，选中分支上的驳回会使本节点停止。',
    orHelp: '第一条分支到达即继续；之后到达的分支被吸收，只要还有分支可能到达，某一分支上的驳回不会使它停止。',
    minHelp: '到达 N 条分支后继续；之后到达的被吸收，当能到达的分支少于 N 条时本节点被跳过。',
  },
  trigger: {
    message: '消息（由系统发送消息启动）',
    messageName: '消息名称',
    messageHelp: '以此名称调用 POST /api/v1/messages 时启动一个实例：消息数据即实例数据，关联 ID 即实例的关联 ID。已有相同关联 ID 的实例在运行时不会再启动。',
  },
  error: {
    title: '此申请已失败',
    titleHandled: '有步骤出错',
    atStep: '出错步骤：“{node}”',
    code: '错误代码',
    details: '详情',
    plugin_failed: '插件（对其他系统的自动调用）执行失败。',
    plugin_timeout: '插件（对其他系统的自动调用）未在时限内完成。',
    no_approver: '此步骤找不到审批人（审批人不存在或已停用）。',
    no_route: '无路可走：此步骤的所有条件都不符合申请的数据。',
    callback_timeout: '外部系统未在时限内回调。',
    approval_timeout: '此步骤未在时限内处理。',
    bad_until: '无法读取延时步骤的等待时间。',
    subprocess_failed: '子流程未能完成。',
    subprocess_depth: '子流程嵌套过深。',
    too_many_children: '子流程要启动的子实例过多。',
    unknown: '步骤出错，错误代码“{code}”。',
  },
  edges: {
    legend: '连线',
    taken: '已走过',
    pruned: '未选中（条件不成立）',
    killed: '因驳回或错误而中止',
  },
}

export const semanticsMessages: Record<Lang, Messages> = { en, 'zh-CN': zhCN }

/** currentLang is the UI language as the i18n setup picks it without a signed-in user's choice. */
export function currentLang(): Lang {
  try {
    const v = localStorage.getItem('halley.language')
    if (v === 'en' || v === 'zh-CN') return v
  } catch {
    /* private mode */
  }
  const langs = typeof navigator !== 'undefined' ? (navigator.languages ?? [navigator.language]) : []
  for (const l of langs) {
    if (/^zh\b/i.test(l)) return 'zh-CN'
    if (/^en\b/i.test(l)) return 'en'
  }
  return 'en'
}

/** st looks up a "section.key" message and fills {name} placeholders. */
export function st(key: string, params: Record<string, string | number> = {}, lang: Lang = currentLang()): string {
  const [section, name] = key.split('.') as [keyof Messages, string]
  const table = (semanticsMessages[lang][section] ?? semanticsMessages.en[section]) as Record<string, string> | undefined
  const text = table?.[name] ?? (semanticsMessages.en[section] as Record<string, string> | undefined)?.[name] ?? key
  return text.replace(/\{(\w+)\}/g, (m, p: string) => (p in params ? String(params[p]) : m))
}

/** NodeErrorInfo is an instance's `error`: the last unhandled node error. */
export interface NodeErrorInfo {
  code: string
  node_id: string
  message: string
  data?: unknown
}

const KNOWN_CODES = ['plugin_failed', 'plugin_timeout', 'no_approver', 'no_route', 'callback_timeout', 'approval_timeout', 'bad_until',
  'subprocess_failed', 'subprocess_depth', 'too_many_children']

/** errorText says in words what a node error code means. */
export function errorText(code: string, lang: Lang = currentLang()): string {
  return KNOWN_CODES.includes(code) ? st(`error.${code}`, {}, lang) : st('error.unknown', { code }, lang)
}
