// ESLint (flat config) for the front end; `npm run lint` (and `make lint`) runs it. The recommended rules of
// ESLint, typescript-eslint and eslint-plugin-vue; an exception names its reason.
import js from '@eslint/js'
import pluginVue from 'eslint-plugin-vue'
import globals from 'globals'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {
    // Built output and generated files: frontend/dist, the types generated from model/definition.schema.json,
    // and unplugin-vue-components' declarations.
    ignores: ['dist/**', 'node_modules/**', 'src/generated/**', 'src/components.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...pluginVue.configs['flat/recommended'],
  {
    files: ['**/*.vue'],
    languageOptions: {
      // TypeScript in <script lang="ts"> and in templates; Vue 3 has no filters, so `a as T | undefined` in a
      // template is a union type, not a filter.
      parserOptions: { parser: tseslint.parser, vueFeatures: { filter: false } },
    },
  },
  {
    files: ['src/**/*.{ts,vue}'],
    languageOptions: { globals: globals.browser },
  },
  {
    files: ['e2e/**/*.mjs', 'scripts/**/*.mjs', '*.config.{js,ts}'],
    languageOptions: { globals: globals.node },
  },
  {
    // The end-to-end test's functions handed to page.evaluate run in the browser page.
    files: ['e2e/run.mjs'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
  {
    rules: {
      // A leading underscore marks a binding unused on purpose: a parameter a callback's signature requires, a
      // property left out of a ...rest copy.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
      // Template layout (attributes per line, a short element's content on its own line) is left to the
      // authors: the templates are written compact, and reflowing thousands of lines would change nothing.
      'vue/max-attributes-per-line': 'off',
      'vue/singleline-html-element-content-newline': 'off',
      'vue/multiline-html-element-content-newline': 'off',
    },
  },
)
