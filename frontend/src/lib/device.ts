// What counts as a phone, once: a viewport at most 767 px wide — below a tablet held upright, the width below
// which Element Plus (the desktop pages' library) has only its smallest layout. The router sends such a screen to
// the phone pages (phoneRoute), and the desktop pages a phone user reaches from them keep their compact layout
// under the same width (composables/narrow.ts; the CSS media queries, which cannot import this, say
// `max-width: 767px`, and device.test.ts keeps them so).
import type { RouteLocationNormalized, RouteLocationRaw } from 'vue-router'

export const PHONE_MAX_WIDTH = 767
export const PHONE_QUERY = `(max-width: ${PHONE_MAX_WIDTH}px)`

/** isPhone: the viewport is a phone's, where the phone pages serve better than the desktop ones. */
export function isPhone(): boolean {
  return typeof window !== 'undefined' && window.matchMedia?.(PHONE_QUERY).matches === true
}

/** phoneRoute is where the router sends a phone that asks for a desktop page with a phone twin (the route's
 * meta.phone names it): the twin, with the same params, query and hash. Undefined otherwise. */
export function phoneRoute(to: Pick<RouteLocationNormalized, 'meta' | 'params' | 'query' | 'hash'>, phone: boolean): RouteLocationRaw | undefined {
  if (!phone || !to.meta.phone) return undefined
  return { name: to.meta.phone, params: to.params, query: to.query, hash: to.hash, replace: true }
}
