/** isPhone: the viewport of a phone, where the H5 pages serve better than the desktop ones. */
export function isPhone(): boolean {
  return typeof window !== 'undefined' && window.matchMedia?.('(max-width: 767px)').matches === true
}
