-- The options each run of a task went with that say where it went (--store as given, never a
-- token; --out, --journal, --config, --vars-file as absolute paths): a JSON list, so the commands a
-- report suggests run as written from any shell.
ALTER TABLE task_runs ADD COLUMN again TEXT;
