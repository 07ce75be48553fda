// The walk of the people who file and approve requests (issue 32), once per language, run by run.mjs with its
// helpers: an admin draws the process in the business view (builder) — an approval by the applicant's manager whose
// form shows the days, the reason and a photo, then a condition branch (more than 3 days: a second approval;
// otherwise straight on) — and publishes it; an invalid start form does not submit; an applicant starts a request on
// a phone through the start form Halley generated for it, with a photo; the approver sees the photo and returns the
// request on a phone; the applicant resubmits it edited; the approver approves it on a phone; the applicant reads
// the timeline on the desktop. axe-core checks each page the walk passes (desktop and phone), in its language.
// walkTemplate is the definition the admin draws (the screenshots script publishes it through the API).

const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1280, height: 800 }

const WORDS = {
  'zh-CN': { name: '请假（组长审批）', days: '天数', reason: '事由', photo: '照片', lead: '组长审批', head: '部门负责人审批', returnTo: '退回…', why: '请把天数改成 3 天', said: '家里有事' },
  en: { name: 'Leave (team lead)', days: 'Days', reason: 'Reason', photo: 'Photo', lead: 'Team lead', head: 'Head of department', returnTo: 'Return to…', why: 'Please make it 3 days', said: 'A family matter' },
}

// A 2×2 PNG: the photo the applicant attaches.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==', 'base64')

/** walkTemplate is the process the walk draws: the applicant's manager approves, seeing the days, the reason and a
 * photo; more than 3 days need a second approval. */
export function walkTemplate(lang) {
  const w = WORDS[lang]
  return {
    nodes: [
      { id: 'start', type: 'start', trigger: { kind: 'manual' } },
      {
        id: 'lead',
        type: 'approval',
        name: w.lead,
        approvers: { relation: 'initiator.manager' },
        form: {
          kind: 'components',
          fields: [
            { id: 'days', type: 'number', label: w.days, field: 'days', readonly: true },
            { id: 'reason', type: 'textarea', label: w.reason, field: 'reason', readonly: true },
            { id: 'photo', type: 'image', label: w.photo, field: 'photo', readonly: true },
          ],
        },
      },
      { id: 'head', type: 'approval', name: w.head, approvers: { relation: 'initiator.manager' } },
      { id: 'end', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'lead' },
      { from: 'lead', to: 'head', condition: { days: { $gt: 3 } } },
      { from: 'lead', to: 'end', default: true },
      { from: 'head', to: 'end' },
    ],
  }
}

/**
 * peopleWalk runs the walk in lang. h: run.mjs's helpers — step, call, raw, login, expect, page() (the current
 * page), base, adminToken, publishTemplate.
 */
export async function peopleWalk(lang, h) {
  const w = WORDS[lang]
  const tag = lang === 'en' ? 'en' : 'zh'
  const key = `people-${tag}-${Date.now().toString(36)}`
  const applicant = `pia-${tag}`
  const approver = `ben-${tag}`
  const pw = 'people-pw-123'
  let instanceId = ''
  let applicantToken = ''
  let approverToken = ''

  const pendingTask = async (token, kind) => {
    const list = await h.call('GET', '/tasks?assignee=me&status=pending', token)
    const t = (list.items ?? list).find((x) => x.instance_id === instanceId && (!kind || x.kind === kind))
    h.expect(t, `no pending ${kind ?? ''} task of ${instanceId}: ${JSON.stringify(list).slice(0, 300)}`)
    return t
  }

  const violations = []
  const axe = async (where) => violations.push(...(await h.axeCheck(`[${lang}] ${where}`)))
  const both = async (where, fn) => {
    for (const vp of [PHONE, DESKTOP]) {
      await h.page().setViewportSize(vp)
      if (fn) await fn()
      await axe(where)
    }
  }

  await h.step(`[${lang}] people: an applicant and their manager`, async () => {
    await h.call('POST', '/users', h.adminToken, { username: approver, password: pw, display_name: `Ben ${tag}`, language: lang, password_change_required: false })
    await h.call('POST', '/users', h.adminToken, { username: applicant, password: pw, display_name: `Pia ${tag}`, manager: approver, language: lang, password_change_required: false })
    applicantToken = (await h.call('POST', '/auth/login', undefined, { username: applicant, password: pw })).token
    approverToken = (await h.call('POST', '/auth/login', undefined, { username: approver, password: pw })).token
  })

  await h.step(`[${lang}] the admin draws the process in the business view with a condition branch and publishes it`, async () => {
    await h.call('PUT', '/me', h.adminToken, { language: lang })
    await h.login('admin', h.adminPassword, { viewport: DESKTOP })
    const page = h.page()
    await page.goto(`${h.base}/admin/templates`)
    await page.click('[data-test=new-template]')
    await page.locator('input[data-test=template-key], [data-test=template-key] input').first().fill(key)
    await page.locator('input[data-test=template-name], [data-test=template-name] input').first().fill(w.name)
    await page.click('[data-test=create-template]')
    await page.waitForURL((u) => u.pathname === `/admin/templates/${key}/designer`)
    await page.click('[data-test=mode-builder]')
    await page.locator('[data-test=builder-node-start]').waitFor()
    // + after the start: an approval by the applicant's manager, with a form showing the days, the reason, a photo
    await page.click('[data-test=builder-add-main-top-1]')
    await page.locator('.el-dropdown-menu:visible [data-test=builder-insert-approval]').click()
    await page.locator('[data-test=builder-node-approval]').waitFor()
    await page.locator('input[data-test=node-name], [data-test=node-name] input').first().fill(w.lead)
    await page.click('[data-test=approvers-relation]')
    await page.locator('.el-select-dropdown__item:visible[data-test="relation-initiator.manager"]').click()
    await page.click('[data-test=node-design-form]')
    const dlg = page.locator('.el-dialog:visible [data-test=form-designer]')
    await dlg.waitFor()
    for (const [type, label, path] of [['number', w.days, 'days'], ['textarea', w.reason, 'reason'], ['image', w.photo, 'photo']]) {
      await dlg.locator(`[data-test=form-palette-${type}]`).click()
      await dlg.locator('input[data-test=field-label], [data-test=field-label] input').first().fill(label)
      await dlg.locator('input[data-test=field-path], [data-test=field-path] input').first().fill(path)
      await dlg.locator('[data-test=field-readonly]').click()
    }
    await page.click('[data-test=node-apply-form]')
    await dlg.waitFor({ state: 'hidden' })
    // + after it: a condition branch; its approval is taken for more than 3 days, otherwise the request goes on
    await page.click('[data-test=builder-add-main-top-2]')
    await page.locator('.el-dropdown-menu:visible [data-test=builder-insert-condition]').click()
    await page.locator('[data-test=builder-block-condition]').waitFor()
    await page.locator('[data-test=builder-node-approval_2]').waitFor()
    await page.locator('input[data-test=node-name], [data-test=node-name] input').first().fill(w.head)
    await page.click('[data-test=approvers-relation]')
    await page.locator('.el-select-dropdown__item:visible[data-test="relation-initiator.manager"]').click()
    await page.click('[data-test=builder-condition-0]')
    await page.locator('[data-test=condition-builder]').waitFor()
    await page.click('[data-test=cond-add-row]')
    await page.click('[data-test=cond-field]')
    await page.keyboard.type('days')
    await page.keyboard.press('Enter')
    await page.click('[data-test=cond-op]')
    await page.locator('.el-select-dropdown__item:visible[data-test=cond-op-gt]').click()
    await page.locator('input[data-test=cond-value], [data-test=cond-value] input').first().fill('3')
    await page.locator('[data-test=builder-condition-0]', { hasText: /> 3/ }).waitFor()
    await page.locator('[data-test=validation-status][data-valid=true]').waitFor()
    await both('designer (business view)')
    await page.click('[data-test=mode-canvas]')
    await page.locator('.vue-flow__node[data-id="approval_2"]').waitFor()
    await both('designer (canvas)')
    await page.click('[data-test=publish]')
    await page.locator('.el-message-box:visible .el-button--primary').click()
    await page.locator('.el-message--success').first().waitFor()
    const v1 = await h.call('GET', `/templates/${key}/versions/1`, h.adminToken)
    const edges = v1.definition.edges.map((e) => JSON.stringify([e.from, e.to, e.condition ?? null, !!e.default]))
    for (const want of [
      ['start', 'approval', null, false],
      ['approval', 'approval_2', { days: { $gt: 3 } }, false],
      ['approval', 'end', null, true],
      ['approval_2', 'end', null, false],
    ]) h.expect(edges.includes(JSON.stringify(want)), `version 1 lacks the edge ${JSON.stringify(want)}: ${edges.join(' ')}`)
    const lead = v1.definition.nodes.find((n) => n.id === 'approval')
    h.expect(lead?.approvers?.relation === 'initiator.manager' && lead.name === w.lead, `the approval: ${JSON.stringify(lead)}`)
    const fields = lead.form?.fields?.map((f) => `${f.type}:${f.field}:${!!f.readonly}`) ?? []
    h.expect(['number:days:true', 'textarea:reason:true', 'image:photo:true'].every((x) => fields.includes(x)), `the approval's form: ${fields}`)
    await h.call('PUT', '/me', h.adminToken, { language: 'en' })
  })

  await h.step(`[${lang}] an invalid start form does not submit, on a phone`, async () => {
    await h.login(applicant, pw, { viewport: PHONE })
    const page = h.page()
    await page.goto(`${h.base}/start/${key}`)
    await page.waitForURL((u) => u.pathname === `/m/start/${key}`)
    await page.locator('[data-test=start-form] [data-field=days]').waitFor()
    await page.click('[data-test=start-submit]')
    await page.locator('[data-test=start-invalid]').waitFor()
    const list = await h.call('GET', `/instances?template=${key}`, h.adminToken)
    h.expect(list.items.length === 0, `an invalid form created ${list.items.length} request(s)`)
    await axe('start (phone)')
    // the desktop start page of the same form
    await page.setViewportSize(DESKTOP)
    await page.goto(`${h.base}/start/${key}`)
    await page.locator('[data-test=start-form] [data-field=days]').waitFor()
    await axe('start (desktop)')
    await page.setViewportSize(PHONE)
    await page.goto(`${h.base}/start/${key}`)
    await page.waitForURL((u) => u.pathname === `/m/start/${key}`)
    await page.locator('[data-test=start-form] [data-field=days]').waitFor()
  })

  await h.step(`[${lang}] the applicant starts it on a phone through its generated start form`, async () => {
    const page = h.page()
    await page.locator('[data-field=days] input').fill('5')
    await page.locator('[data-field=reason] textarea').fill(w.said)
    await page.locator('[data-field=photo] input[type=file]').setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: PNG })
    await page.locator('[data-field=photo] [data-test=file-preview]').waitFor()
    await page.click('[data-test=start-submit]')
    await page.waitForURL((u) => u.pathname.startsWith('/instances/'))
    instanceId = new URL(page.url()).pathname.split('/').pop()
    const inst = await h.call('GET', `/instances/${instanceId}`, h.adminToken)
    h.expect(inst.status === 'running' && inst.context.days === 5 && inst.context.reason === w.said, `the new request: ${JSON.stringify(inst).slice(0, 300)}`)
    const photo = JSON.stringify(inst.context.photo ?? null)
    h.expect(/"att_[0-9a-f]{32}"/.test(photo) && !photo.includes('data:'), `the photo is not an uploaded attachment: ${photo.slice(0, 200)}`)
    await page.locator('[data-test=submitted]').waitFor()
  })

  await h.step(`[${lang}] the manager returns it to the applicant on a phone`, async () => {
    const t = await pendingTask(approverToken)
    await h.login(approver, pw, { viewport: PHONE })
    const page = h.page()
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
    await page.locator('[data-path=photo]', { hasText: 'photo.png' }).waitFor()
    await axe('task (phone)')
    await page.locator('.bar .more').click()
    await page.locator('.van-action-sheet__item', { hasText: w.returnTo }).click()
    await page.locator('[data-test=action-popup]').waitFor()
    await page.locator('[data-test=comment] textarea').fill(w.why)
    await page.click('[data-test=confirm]')
    await page.locator('[data-test=action-popup]').waitFor({ state: 'hidden' })
    await pendingTask(applicantToken, 'resubmit')
  })

  await h.step(`[${lang}] the applicant reads why, and resubmits it edited on a phone`, async () => {
    const t = await pendingTask(applicantToken, 'resubmit')
    await h.login(applicant, pw, { viewport: PHONE })
    const page = h.page()
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
    const why = page.locator('[data-test=returned-reason]')
    await why.waitFor()
    h.expect((await why.innerText()).includes(w.why), `the return reason is not on top: ${await why.innerText()}`)
    h.expect((await page.locator('.bar .more').count()) === 0, 'the applicant is offered the approver’s other buttons')
    await axe('resubmit (phone)')
    await page.setViewportSize(DESKTOP)
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.locator('[data-test=returned-reason]').waitFor()
    await axe('resubmit (desktop)')
    await page.setViewportSize(PHONE)
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
    await page.locator('[data-test=returned-reason]').waitFor()
    await page.locator('[data-field=days] input').fill('3')
    await page.click('[data-test=approve]')
    await page.click('[data-test=confirm]')
    await page.locator('[data-test=action-popup]').waitFor({ state: 'hidden' })
    const inst = await h.call('GET', `/instances/${instanceId}`, h.adminToken)
    h.expect(inst.context.days === 3 && inst.status === 'running', `after resubmitting: ${JSON.stringify(inst.context)} ${inst.status}`)
  })

  await h.step(`[${lang}] the manager approves it on a phone`, async () => {
    const t = await pendingTask(approverToken)
    await h.login(approver, pw, { viewport: PHONE })
    const page = h.page()
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
    await page.locator('[data-path=days]').waitFor()
    await page.setViewportSize(DESKTOP)
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.locator('[data-test=approve]').waitFor()
    await axe('task (desktop)')
    await page.setViewportSize(PHONE)
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
    await page.click('[data-test=approve]')
    await page.click('[data-test=confirm]')
    await page.locator('[data-test=instance-status][data-status=completed]').waitFor()
  })

  await h.step(`[${lang}] the applicant reads the timeline: people's acts, the change in words, no engine steps`, async () => {
    await h.login(applicant, pw, { viewport: DESKTOP })
    const page = h.page()
    await page.goto(`${h.base}/instances/${instanceId}`)
    const entries = page.locator('[data-test=timeline-entry]')
    await entries.first().waitFor()
    const actions = await entries.evaluateAll((els) => els.map((e) => e.getAttribute('data-action')))
    for (const a of ['instance.started', 'task.returned', 'task.approved']) h.expect(actions.includes(a), `the timeline lacks ${a}: ${actions}`)
    h.expect(!actions.some((a) => /^(node\.|task\.created|cc\.)/.test(a)), `the timeline shows engine steps: ${actions}`)
    const changes = await page.locator('[data-test=changes]').allInnerTexts()
    h.expect(changes.some((c) => c.includes(w.days) && /5\s*→\s*3/.test(c)), `the change does not read "${w.days} 5 → 3": ${changes}`)
    const text = await page.locator('[data-test=history]').innerText()
    h.expect(!/[{}]|lead_review|"days"/.test(text), `the timeline shows raw data: ${text}`)
    h.expect(text.includes(w.lead), `the timeline does not name the step ${w.lead}: ${text}`)
    await axe('request (desktop)')
    await page.setViewportSize(PHONE)
    await page.reload()
    await page.locator('[data-test=timeline-entry]').first().waitFor()
    await axe('request (phone)')
  })

  await h.step(`[${lang}] axe-core finds no serious or critical violation on the walk's pages`, async () => {
    h.expect(violations.length === 0, `axe violations:\n${violations.join('\n')}`)
  })
}
