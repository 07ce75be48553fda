-- Halley schema: labels in two languages (API.md "Additions of 2026-11-28").
-- templates.i18n: the template's name and description per language ({"zh-CN":{"name","description"},"en":{...}}),
-- copied from the definition's i18n when the template is created and at every publish, for listings.
-- instances.title_i18n: the instance's title per language ({"zh-CN":"…","en":"…"}) when it was rendered from the
-- template's title pattern; NULL for a title given by the starter.

ALTER TABLE templates ADD COLUMN i18n LONGTEXT NULL;
ALTER TABLE instances ADD COLUMN title_i18n LONGTEXT NULL;
