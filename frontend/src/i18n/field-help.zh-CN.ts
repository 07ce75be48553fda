// 中文（简体）的设计器字段帮助：ⓘ 的提示文字。英文原文是定义 schema 中每个字段的 description，即 model/ 中 Go 类型的
// 文档注释（lib/schema.ts 的 describe 读取它）；这里按 “类型.字段” 给出它的中文，缺少时回退到英文。
// Go 类型新增字段时在此补上译文：lib/schema.test.ts 检查 schema 描述的每个字段在这里都有中文。
export default {
  'Definition.nodes': '流程的各个步骤。',
  'Definition.edges': '步骤之间的连线。',
  'Definition.options': '整个流程的设置。',
  'Definition.meta': '供编辑器使用的自由数据（缩放、布局）；引擎会忽略它。',
  'Definition.title_pattern':
    '每个实例的标题，在发起时生成（申请人重新提交并修改数据后重新生成），发起人自己给出标题时除外：文本中可用占位符 {initiator}（发起人显示名）、{template}（模板名称）、{date}（发起日期，YYYY-MM-DD）和 {路径}（申请数据中的值，如 {days} 或 {leave.type}）；{{ 和 }} 表示花括号本身。缺少的值显示为空。',
  'Definition.i18n': '模板的名称、说明和标题模板的各语言文本（zh-CN、en）。',
  'DefinitionI18n.zh-CN': '简体中文。',
  'DefinitionI18n.en': '英文。',
  'DefinitionTexts.name': '此语言的模板名称。',
  'DefinitionTexts.description': '此语言的模板说明。',
  'DefinitionTexts.title_pattern': '此语言的标题模板（同 title_pattern）。',

  'Options.retention':
    '该版本的实例结束后在数据库中保留多久，之后由保留清理写入归档并从数据库删除：如 "720h" 的时长，或秒数；0 表示永久保留。不填时使用 HALLEY_INSTANCE_RETENTION。',

  'Node.id': '在本流程定义内唯一：只能包含字母、数字、“_” 和 “-”。',
  'Node.type':
    'start：有且只有一个，决定实例如何发起；approval：由人审批；auto：运行其插件后继续；delay：等待；callback：等待外部回调或消息；error：捕获未处理的错误；end：正常结束；terminate：立即结束实例。',
  'Node.name': '显示给用户的名称；不填时显示节点 id。',
  'Node.i18n': '各语言的名称（zh-CN、en）：用户看到自己语言的名称，没有时显示 name。',
  'NodeI18n.zh-CN': '简体中文。',
  'NodeI18n.en': '英文。',
  'NodeTexts.name': '此语言的节点名称。',
  'Node.join':
    '有多条入线的节点如何激活："and"（默认）等到每条入线分支都已走过或未被选中、且至少一条已走过；"or" 在第一条分支到达时激活；{"min": N} 在 N 条分支到达时激活。',
  'Node.plugins': '节点运行的插件。',
  'Node.timeout':
    '节点最多可用多久：如 "30m"、"48h" 的时长，或秒数；0 或不填表示不限。超时后如何处理取决于 on_timeout、timeout_branch 或错误处理。',
  'Node.error_handler': '插件或节点的工作失败时如何处理。',
  'Node.is_ignore': '直接跳过该节点而不执行：不创建任务，也不运行插件。',
  'Node.cc': '节点激活时抄送的人，他们可以查看该实例。可以用用户、角色、上下文路径或关系，不能用分组。',
  'Node.meta': '供编辑器使用的自由数据（位置、颜色）；引擎会忽略它。',
  'Node.trigger': '该模板的实例如何发起。',
  'Node.approvers': '由谁审批。',
  'Node.sign':
    'or（或签，默认）：第一个决定即为结果；all（会签）：所有人都须同意，一人驳回即驳回；sequential（顺序会签）：依次逐个审批；vote（票签）：同意的比例达到 pass_ratio 即通过。',
  'Node.pass_ratio': '票签时通过所需的同意比例，大于 0 且不超过 1，例如 0.6。',
  'Node.group_sign': '并签（approvers.groups）中每个分组如何决定，取值同 sign；默认为 or。',
  'Node.on_timeout': '超时后如何处理：approve 自动同意、reject 自动驳回、remind 提醒审批人，或 {"branch": "节点 id"} 转到另一个节点。',
  'Node.form': '审批人看到的表单（表单设计器中的表单模板）；不设置时审批人看到发起表单。',
  'Node.interval': '等待多久：如 "10m" 的时长，或秒数。',
  'Node.until': '一直等到这个时间：RFC 3339 时间，或给出该时间的上下文路径。',
  'Node.timeout_branch': '超时后转到的节点；不设置时节点失败，并按其错误处理执行。',
  'Node.message': '消息名称：以此名称和实例的关联 ID 调用 POST /messages 即可恢复该节点。',
  'Node.template': '子流程节点启动的模板键（一个已发布的其他模板）。',
  'Node.version': '要启动的模板版本；留空：本实例发起时该模板的最新发布版本。',
  'Node.input': '子流程的上下文：子流程路径 -> 本实例上下文中的路径（"$" 表示整个上下文）。',
  'Node.output': '子流程完成后带回的数据：本实例上下文中的路径 -> 子流程路径（"$" 表示子流程的整个上下文）。使用 for_each 时，每个子流程的映射结果是 <节点 ID>.items 的一个元素。',
  'Node.for_each': '一个保存数组的上下文路径：每个元素启动一个子流程（最多 1000 个），其上下文中带有 item 和 index。',
  'Node.completion': '使用 for_each 时："all"（默认）等待所有子流程；{"min": N} 在 N 个完成后继续并终止其余子流程。',

  'Edge.id': '可选的 id，在所有连线中唯一。',
  'Edge.from': '连线离开的节点。',
  'Edge.to': '连线进入的节点。',
  'Edge.condition': '针对实例上下文的 MongoDB 风格查询，例如 {"days": {"$gt": 3}}；没有条件时总会走这条连线。',
  'Edge.default': '只有当同一节点的其他连线都未被选中时，才走这条连线。',
  'Edge.meta': '供编辑器使用的自由数据；引擎会忽略它。',

  'Plugins.pre': '节点激活时、开始等待之前按顺序运行的插件（例如通知某人）。',
  'Plugins.after': '节点完成后（审批已决定、回调已到达；自动节点的工作）按顺序运行的插件。',

  'ErrorHandler.operation':
    'throw（默认）：转到模板的错误节点（如果有），否则实例失败；retry：重新执行；ignore：当作成功继续；catch：转到 catch.branch。',
  'ErrorHandler.retry': '重试几次，每次间隔多久。',
  'ErrorHandler.catch': '转到哪里：代替出线而走的节点。',
  'RetryPolicy.count': '节点失败后再运行的次数，至少 1 次。',
  'RetryPolicy.period': '两次尝试之间的间隔：如 "2s" 的时长，或秒数。',
  'CatchPolicy.branch': '代替出线而转到的节点（与 retry 一起使用时：在重试次数用尽之后）。',

  'Approvers.users': '指定的这些用户。',
  'Approvers.roles': '拥有其中任一角色的所有用户。',
  'Approvers.context': '实例上下文中的 gjson 路径，给出一个用户或一组用户，例如 approvers.lead。',
  'Approvers.relation': '与发起人相关的人。',
  'Approvers.groups': '并签：每组用户生成一组任务，各组按 group_sign 决定；每一组都须通过。',
  'Approvers.groups_context': '实例上下文中的 gjson 路径，给出分组（由用户列表组成的列表）。',

  'Trigger.kind':
    'manual：通过 POST /instances 发起；crontab：按计划发起；sync-api 和 async-api：业务系统调用 /trigger/{sync|async}/{module}/{function}；form：用户提交模板的表单；message：以触发器的消息名称调用 POST /messages。',
  'Trigger.expr': '5 个字段：分 时 日 月 周，例如 "0 9 * * 1-5"；加上前缀 "CRON_TZ=Asia/Shanghai " 可指定时区。',
  'Trigger.allow_repeated': '即使上一次触发发起的实例仍在运行，也照常发起。',
  'Trigger.start_at': '计划最早可以触发的时间（RFC 3339）；为空：从现在起。',
  'Trigger.end_at': '计划停止触发的时间（RFC 3339）；为空：永不停止。',
  'Trigger.module': '触发 URL 中的模块部分：只能包含字母、数字、“.”、“_” 和 “-”。',
  'Trigger.function': '触发 URL 中的函数部分：只能包含字母、数字、“.”、“_” 和 “-”。',
  'Trigger.method': '调用方使用的 HTTP 方法：get、post（默认）、put、patch 或 delete。',
  'Trigger.login_verification':
    '调用方如何认证：none（默认）不认证；token：请求头 X-Halley-Token 须等于 header_token；password：请求头 X-Halley-User 和 X-Halley-Password 须分别等于 header_user 和 header_password。',
  'Trigger.header_token': '调用方在 X-Halley-Token 中发送的令牌（login_verification 为 token 时）。只写：设置后只显示 "***"，保存 "***" 即保留原值。',
  'Trigger.header_user': '调用方在 X-Halley-User 中发送的用户名（login_verification 为 password 时）。',
  'Trigger.header_password':
    '调用方在 X-Halley-Password 中发送的密码（login_verification 为 password 时）。只写：设置后只显示 "***"，保存 "***" 即保留原值。',
  'Trigger.allow_remote_ips': '允许调用的 IP 地址和 CIDR，用逗号分隔，例如 "10.0.0.0/8,1.2.3.4"；为空：不限来源。',
  'Trigger.form': '用户填写后发起流程的表单（表单设计器中的表单模板）。',
  'Trigger.members': '可以提交表单的人；为空：所有人。',
  'Trigger.require_login': '提交人必须登录。',
  'Trigger.message': '消息名称：以此名称调用 POST /messages 即发起一个实例（消息数据成为上下文，其关联 ID 成为实例的关联 ID，发送者成为发起人）。',
  'Approvers.levels': '与 initiator.managers 一起用：沿主管链向上几级（1 到 20）；链更短时审批人更少。',
  'Approvers.until_role': '与 initiator.managers 一起用：沿主管链向上，直到（并包括）第一个持有此角色的人。',
  'Approvers.departments': '这些部门的全部成员。',
  'Approvers.scope': '在哪里查找角色：tenant（默认：所有持有人）、initiator.department（发起人所在部门的持有人）、initiator.department_tree（从发起人部门向上最近一个有持有人的部门）。',
  'Node.on_no_approver': '没有人可以审批时怎么办：error（默认：节点错误 no_approver）、pass（节点通过，记为 task.auto_approved）、reject（节点被拒绝）、admins（由租户管理员审批）。',
  'Node.exclude_initiator': '发起人永远不是此节点的审批人（职责分离）；若无人剩下，按 on_no_approver 处理。',
  'Options.self_approval': '发起人同时是审批人时：allow（默认：与他人一样审批）、pass（其任务自动通过）、manager（由其主管代为审批）。',
  'Options.dedupe': '因之前已审批而自动通过的审批人：none（默认）、consecutive（审批了紧邻的上一个审批节点的人）、any（审批过本实例任一先前节点的人）。',
} as Record<string, string>
