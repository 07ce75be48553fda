import { createRouter, createWebHistory, type RouteRecordRaw } from 'vue-router'
import { session } from './stores/session'
import { isPhone } from './lib/device'

declare module 'vue-router' {
  interface RouteMeta {
    /** reachable without signing in */
    public?: boolean
    /** admins only */
    admin?: boolean
    /** no desktop header: login and the phone pages */
    bare?: boolean
    title?: string
  }
}

const routes: RouteRecordRaw[] = [
  { path: '/login', name: 'login', component: () => import('./views/LoginView.vue'), meta: { public: true, bare: true, title: 'Sign in' } },
  { path: '/', redirect: () => (isPhone() ? '/m/inbox' : '/inbox') },
  { path: '/inbox', name: 'inbox', component: () => import('./views/InboxView.vue'), meta: { title: 'Inbox' } },
  { path: '/tasks/:id', name: 'task', component: () => import('./views/TaskView.vue'), props: true, meta: { title: 'Task' } },
  { path: '/start', name: 'start', component: () => import('./views/StartListView.vue'), meta: { title: 'Start a process' } },
  { path: '/start/:tkey', name: 'start-form', component: () => import('./views/StartFormView.vue'), props: true, meta: { title: 'Start a process' } },
  { path: '/requests', name: 'requests', component: () => import('./views/MyRequestsView.vue'), meta: { title: 'My requests' } },
  { path: '/cc', name: 'cc', component: () => import('./views/CcView.vue'), meta: { title: 'Copied to me' } },
  { path: '/instances/:id', name: 'instance', component: () => import('./views/InstanceView.vue'), props: true, meta: { title: 'Request' } },

  // Phone (H5) pages: Vant, no desktop chrome.
  { path: '/m/inbox', name: 'm-inbox', component: () => import('./views/h5/H5Inbox.vue'), meta: { bare: true, title: 'Inbox' } },
  { path: '/m/tasks/:id', name: 'm-task', component: () => import('./views/h5/H5Task.vue'), props: true, meta: { bare: true, title: 'Task' } },

  // Admin.
  { path: '/admin/templates', name: 'templates', component: () => import('./views/admin/TemplatesView.vue'), meta: { admin: true, title: 'Templates' } },
  {
    path: '/admin/templates/:tkey/designer',
    name: 'designer',
    component: () => import('./views/admin/designer/DesignerView.vue'),
    props: true,
    meta: { admin: true, title: 'Designer' },
  },
  {
    path: '/admin/templates/:tkey/versions/:version',
    name: 'version',
    component: () => import('./views/admin/designer/DesignerView.vue'),
    props: (r) => ({ tkey: r.params.tkey, version: Number(r.params.version) }),
    meta: { admin: true, title: 'Version' },
  },
  { path: '/admin/forms', name: 'forms', component: () => import('./views/admin/FormPlaygroundView.vue'), meta: { admin: true, title: 'Form designer' } },
  { path: '/admin/plugins', name: 'plugins', component: () => import('./views/admin/PluginsView.vue'), meta: { admin: true, title: 'Plugins' } },
  { path: '/admin/plugins/:name', name: 'plugin', component: () => import('./views/admin/PluginView.vue'), props: true, meta: { admin: true, title: 'Plugin' } },
  { path: '/admin/instances', name: 'instances', component: () => import('./views/admin/InstancesView.vue'), meta: { admin: true, title: 'Instances' } },
  { path: '/admin/users', name: 'users', component: () => import('./views/admin/UsersView.vue'), meta: { admin: true, title: 'Users' } },
  { path: '/:pathMatch(.*)*', name: 'not-found', component: () => import('./views/NotFoundView.vue'), meta: { title: 'Not found' } },
]

export const router = createRouter({ history: createWebHistory(), routes })

router.beforeEach(async (to) => {
  if (to.meta.public) return true
  if (!session.state.token) return { name: 'login', query: { redirect: to.fullPath } }
  try {
    await session.loadMe()
  } catch {
    // The request failed (the client logs out on 401); let the page show its own error otherwise.
    if (!session.state.token) return { name: 'login', query: { redirect: to.fullPath } }
  }
  if (to.meta.admin && !session.isAdmin.value) return { name: 'inbox' }
  return true
})

router.afterEach((to) => {
  document.title = to.meta.title ? `${to.meta.title} · Halley` : 'Halley'
})
