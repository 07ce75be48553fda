// Whether the screen is a phone's (lib/device.ts says what that is): the desktop pages a phone user reaches (a
// request, my requests, the admin lists) keep only their essential table columns there, so nothing needs
// scrolling sideways.
import { onBeforeUnmount, ref, type Ref } from 'vue'
import { PHONE_QUERY } from '@/lib/device'

/** useNarrow is true while the viewport is a phone's, and follows it (a rotated phone). */
export function useNarrow(): Ref<boolean> {
  const mq = typeof window !== 'undefined' && window.matchMedia ? window.matchMedia(PHONE_QUERY) : null
  const narrow = ref(mq?.matches ?? false)
  const onChange = (e: MediaQueryListEvent) => (narrow.value = e.matches)
  mq?.addEventListener('change', onChange)
  onBeforeUnmount(() => mq?.removeEventListener('change', onChange))
  return narrow
}
