// The app's pages, and who may reach which: the route table and the guard every navigation passes (router.ts
// installs both). Plain data and a function, so a unit test runs them on a router of its own.
import type { RouteLocationNormalized, RouteLocationRaw, RouteRecordRaw } from 'vue-router'
import { session } from './stores/session'
import { isPhone, phoneRoute } from './lib/device'

declare module 'vue-router' {
  interface RouteMeta {
    /** reachable without signing in */
    public?: boolean
    /** admins only */
    admin?: boolean
    /** no desktop header: login and the phone pages */
    bare?: boolean
    /** an i18n key (title.*), or plain text */
    title?: string
    /** the name of this page's phone twin, where the router sends a phone (lib/device.ts) */
    phone?: string
  }
}

export const routes: RouteRecordRaw[] = [
  { path: '/login', name: 'login', component: () => import('./views/LoginView.vue'), meta: { public: true, bare: true, title: 'title.signIn' } },
  // Chosen password: a page of its own (plain elements like the sign-in page, the same on a phone), which the guard
  // below sends every page to while the user must change the password; only signing out leaves it.
  { path: '/password', name: 'password', component: () => import('./views/ChangePasswordView.vue'), meta: { bare: true, title: 'title.password' } },
  { path: '/', redirect: '/inbox' },
  { path: '/profile', name: 'profile', component: () => import('./views/ProfileView.vue'), meta: { title: 'title.profile' } },
  { path: '/inbox', name: 'inbox', component: () => import('./views/InboxView.vue'), meta: { title: 'title.inbox', phone: 'm-inbox' } },
  { path: '/tasks/:id', name: 'task', component: () => import('./views/TaskView.vue'), props: true, meta: { title: 'title.task', phone: 'm-task' } },
  { path: '/start', name: 'start', component: () => import('./views/StartListView.vue'), meta: { title: 'title.start' } },
  { path: '/start/:tkey', name: 'start-form', component: () => import('./views/StartFormView.vue'), props: true, meta: { title: 'title.start', phone: 'm-start' } },
  { path: '/requests', name: 'requests', component: () => import('./views/MyRequestsView.vue'), meta: { title: 'title.requests' } },
  { path: '/cc', name: 'cc', component: () => import('./views/CcView.vue'), meta: { title: 'title.cc' } },
  { path: '/instances/:id', name: 'instance', component: () => import('./views/InstanceView.vue'), props: true, meta: { title: 'title.request' } },

  // Phone (H5) pages: Vant, no desktop chrome. A phone asking for their desktop twins is sent here (the guard).
  { path: '/m/inbox', name: 'm-inbox', component: () => import('./views/h5/H5Inbox.vue'), meta: { bare: true, title: 'title.inbox' } },
  { path: '/m/profile', name: 'm-profile', component: () => import('./views/h5/H5Profile.vue'), meta: { bare: true, title: 'title.profile' } },
  { path: '/m/notifications', name: 'm-notifications', component: () => import('./views/h5/H5Notifications.vue'), meta: { bare: true, title: 'title.notifications' } },
  { path: '/m/start/:tkey', name: 'm-start', component: () => import('./views/h5/H5Start.vue'), props: true, meta: { bare: true, title: 'title.start' } },
  { path: '/m/tasks/:id', name: 'm-task', component: () => import('./views/h5/H5Task.vue'), props: true, meta: { bare: true, title: 'title.task' } },

  // Admin.
  { path: '/admin/templates', name: 'templates', component: () => import('./views/admin/TemplatesView.vue'), meta: { admin: true, title: 'title.templates' } },
  {
    path: '/admin/templates/:tkey/designer',
    name: 'designer',
    component: () => import('./views/admin/designer/DesignerView.vue'),
    props: true,
    meta: { admin: true, title: 'title.designer' },
  },
  {
    path: '/admin/templates/:tkey/versions/:version',
    name: 'version',
    component: () => import('./views/admin/designer/DesignerView.vue'),
    props: (r) => ({ tkey: r.params.tkey, version: Number(r.params.version) }),
    meta: { admin: true, title: 'title.version' },
  },
  { path: '/admin/forms', name: 'forms', component: () => import('./views/admin/FormPlaygroundView.vue'), meta: { admin: true, title: 'title.forms' } },
  { path: '/admin/plugins', name: 'plugins', component: () => import('./views/admin/PluginsView.vue'), meta: { admin: true, title: 'title.plugins' } },
  { path: '/admin/plugins/:name', name: 'plugin', component: () => import('./views/admin/PluginView.vue'), props: true, meta: { admin: true, title: 'title.plugin' } },
  { path: '/admin/instances', name: 'instances', component: () => import('./views/admin/InstancesView.vue'), meta: { admin: true, title: 'title.instances' } },
  { path: '/admin/attention', name: 'attention', component: () => import('./views/admin/AttentionView.vue'), meta: { admin: true, title: 'title.attention' } },
  { path: '/admin/users', name: 'users', component: () => import('./views/admin/UsersView.vue'), meta: { admin: true, title: 'title.users' } },
  { path: '/admin/tokens', name: 'tokens', component: () => import('./views/admin/TokensView.vue'), meta: { admin: true, title: 'title.tokens' } },
  { path: '/admin/channels', name: 'channels', component: () => import('./views/admin/ChannelsView.vue'), meta: { admin: true, title: 'title.channels' } },
  { path: '/admin/notification-settings', name: 'notification-settings', component: () => import('./views/admin/NotificationSettingsView.vue'), meta: { admin: true, title: 'title.notificationSettings' } },
  { path: '/admin/audit', name: 'audit', component: () => import('./views/admin/AuditView.vue'), meta: { admin: true, title: 'title.audit' } },
  { path: '/:pathMatch(.*)*', name: 'not-found', component: () => import('./views/NotFoundView.vue'), meta: { title: 'title.notFound' } },
]

/** guard decides where a navigation goes: the sign-in page for a stranger, the new-password page while the password
 * must change, the inbox for a non-admin asking for an admin page, a page's phone twin for a phone; else on. */
export async function guard(to: RouteLocationNormalized): Promise<RouteLocationRaw | true> {
  if (to.meta.public) return true
  if (!session.state.token) return { name: 'login', query: { redirect: to.fullPath } }
  try {
    await session.loadMe()
  } catch {
    // The request failed (the client logs out on 401); let the page show its own error otherwise.
    if (!session.state.token) return { name: 'login', query: { redirect: to.fullPath } }
  }
  if (session.mustChangePassword.value) {
    if (to.name !== 'password') return { name: 'password', query: { redirect: to.fullPath } }
    return true
  }
  if (to.name === 'password') return { path: '/' }
  if (to.meta.admin && !session.isAdmin.value) return { name: 'inbox' }
  return phoneRoute(to, isPhone()) ?? true
}
