-- The last fencing epoch (work_epoch) kept by the statements that give one: a gate or a claim that
-- moves a call to sent writes its epoch, and the journal's last epoch follows, so no statement of
-- its own is needed to keep it (the runner drives SQLite and PostgreSQL alike; PostgreSQL's is the
-- sequence pooler_epoch).
CREATE TRIGGER IF NOT EXISTS work_epoch_kept AFTER UPDATE OF epoch ON work
WHEN NEW.epoch IS NOT NULL
BEGIN
    UPDATE work_epoch SET value = max(value, NEW.epoch) WHERE id = 1;
END;
