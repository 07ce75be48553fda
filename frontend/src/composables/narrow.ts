// Whether the screen is a phone's: the desktop pages a phone user reaches (a request, my requests, the admin
// lists) keep only their essential table columns there, so nothing needs scrolling sideways.
import { onBeforeUnmount, ref, type Ref } from 'vue'

export const NARROW_QUERY = '(max-width: 600px)'

/** useNarrow is true while the viewport is at most 600 px wide, and follows it (a rotated phone). */
export function useNarrow(): Ref<boolean> {
  const mq = typeof window !== 'undefined' && window.matchMedia ? window.matchMedia(NARROW_QUERY) : null
  const narrow = ref(mq?.matches ?? false)
  const onChange = (e: MediaQueryListEvent) => (narrow.value = e.matches)
  mq?.addEventListener('change', onChange)
  onBeforeUnmount(() => mq?.removeEventListener('change', onChange))
  return narrow
}
