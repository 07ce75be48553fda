import type { ComputedRef, InjectionKey } from 'vue'
import type { Highlights } from '@/lib/validation'

/** The validation highlights of the canvas, provided by the designer to every node. */
export const HIGHLIGHTS: InjectionKey<ComputedRef<Highlights>> = Symbol('halley-highlights')
