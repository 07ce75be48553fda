// The walk of the people who file and approve requests (issue 32), once per language, run by run.mjs with its
// helpers: an invalid start form does not submit; an applicant starts a request on a phone through the start form
// Halley generated for the template; the approver returns it on a phone; the applicant resubmits it edited; the
// approver approves it on a phone; the applicant reads the timeline on the desktop. Other walks extend it by adding
// steps to `peopleWalk` (the template it publishes is built by `walkTemplate`).

const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1280, height: 800 }

const WORDS = {
  'zh-CN': { days: '天数', reason: '事由', lead: '组长审批', returnTo: '退回…', why: '请把天数改成 3 天', said: '家里有事' },
  en: { days: 'Days', reason: 'Reason', lead: 'Team lead', returnTo: 'Return to…', why: 'Please make it 3 days', said: 'A family matter' },
}

/** walkTemplate is the process the walk files: the applicant's manager approves, seeing the days and the reason. */
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
          ],
        },
      },
      { id: 'end', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'lead' },
      { from: 'lead', to: 'end' },
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

  await h.step(`[${lang}] people: an applicant and their manager, and a process without a form of its own`, async () => {
    await h.call('POST', '/users', h.adminToken, { username: approver, password: pw, display_name: `Ben ${tag}`, language: lang, password_change_required: false })
    await h.call('POST', '/users', h.adminToken, { username: applicant, password: pw, display_name: `Pia ${tag}`, manager: approver, language: lang, password_change_required: false })
    await h.publishTemplate(h.adminToken, key, walkTemplate(lang))
    applicantToken = (await h.call('POST', '/auth/login', undefined, { username: applicant, password: pw })).token
    approverToken = (await h.call('POST', '/auth/login', undefined, { username: approver, password: pw })).token
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
  })

  await h.step(`[${lang}] the applicant starts it on a phone through its generated start form`, async () => {
    const page = h.page()
    await page.locator('[data-field=days] input').fill('5')
    await page.locator('[data-field=reason] textarea').fill(w.said)
    await page.click('[data-test=start-submit]')
    await page.waitForURL((u) => u.pathname.startsWith('/instances/'))
    instanceId = new URL(page.url()).pathname.split('/').pop()
    const inst = await h.call('GET', `/instances/${instanceId}`, h.adminToken)
    h.expect(inst.status === 'running' && inst.context.days === 5 && inst.context.reason === w.said, `the new request: ${JSON.stringify(inst).slice(0, 300)}`)
    await page.locator('[data-test=submitted]').waitFor()
  })

  await h.step(`[${lang}] the manager returns it to the applicant on a phone`, async () => {
    const t = await pendingTask(approverToken)
    await h.login(approver, pw, { viewport: PHONE })
    const page = h.page()
    await page.goto(`${h.base}/tasks/${t.id}`)
    await page.waitForURL((u) => u.pathname === `/m/tasks/${t.id}`)
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
  })
}
