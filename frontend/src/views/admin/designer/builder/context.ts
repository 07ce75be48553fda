// What the business designer's chains share, provided once by BuilderView: the flow shown, what is selected, and
// the edits (each one writes the definition back and puts it on the canvas).
import type { ComputedRef, InjectionKey } from 'vue'
import type { Branch, ChainPath, Flow, Insertable } from '@/lib/builder'
import type { ReadableField } from '@/lib/conditionText'

export interface BuilderContext {
  flow: ComputedRef<Flow>
  readonly: ComputedRef<boolean>
  selected: ComputedRef<string | null>
  /** the definition edge each branch starts with */
  branchEdges: ComputedRef<Map<Branch, { from: string; to: string }>>
  fields: ComputedRef<ReadableField[]>
  insert(path: ChainPath, index: number, what: Insertable): void
  remove(path: ChainPath, index: number): void
  addBranch(path: ChainPath, index: number): void
  removeBranch(path: ChainPath, index: number, branch: number): void
  selectNode(id: string): void
  selectBranch(branch: Branch): void
}

export const BUILDER: InjectionKey<BuilderContext> = Symbol('halley-builder')
