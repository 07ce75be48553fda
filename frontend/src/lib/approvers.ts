// Readable summaries of approver specifications (API.md "Approvers").
import type { Approvers, SignMode } from './definition'

export function describeApprovers(a: Approvers | undefined): string {
  if (!a) return 'nobody'
  const parts: string[] = []
  if (a.users?.length) parts.push(`users ${a.users.join(', ')}`)
  if (a.roles?.length) parts.push(`roles ${a.roles.join(', ')}`)
  if (a.context) parts.push(`from context ${a.context}`)
  if (a.relation) parts.push(a.relation === 'initiator.manager' ? "initiator's manager" : "initiator's department leader")
  if (a.groups?.length) parts.push(`${a.groups.length} group(s): ${a.groups.map((g) => `[${g.join(', ')}]`).join(' ')}`)
  if (a.groups_context) parts.push(`groups from context ${a.groups_context}`)
  return parts.length ? parts.join('; ') : 'nobody'
}

// Keyed by the schema's sign modes: a mode added to the Go types fails the build until it has a label here.
export const SIGN_LABELS: Record<SignMode, string> = {
  or: 'Or-sign (first decision decides)',
  all: 'Countersign (all must approve)',
  sequential: 'Sequential countersign (one after another)',
  vote: 'Vote (pass ratio)',
}
