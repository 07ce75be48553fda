-- Halley schema, migration 8: initiators that are not people can no longer be usernames (API.md, "Security changes").
-- Crontab starts were owned by "cron" and anonymous form starts by "anonymous": a user an admin created with one of
-- those names read and acted on all of them. They become "system:cron" and "system:anonymous" (':' is not allowed in
-- a username) wherever an initiator is stored: the instance, the copy on each of its tasks, and the initiator's own
-- resubmit tasks (after a return to start) whose assignee is the initiator. Those names are reserved from now on.
-- History rows keep the actor they were written with: they record what happened, they grant nothing, and
-- rewriting the largest table at start-up would cost more than it tells.

UPDATE instances SET initiator = 'system:cron' WHERE initiator = 'cron';
UPDATE instances SET initiator = 'system:anonymous' WHERE initiator = 'anonymous';
UPDATE tasks SET initiator = 'system:cron' WHERE initiator = 'cron';
UPDATE tasks SET initiator = 'system:anonymous' WHERE initiator = 'anonymous';
UPDATE tasks SET assignee = initiator WHERE kind = 'resubmit' AND ((assignee = 'cron' AND initiator = 'system:cron') OR (assignee = 'anonymous' AND initiator = 'system:anonymous'));
