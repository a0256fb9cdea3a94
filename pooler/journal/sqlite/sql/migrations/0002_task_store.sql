-- The store a task runs against (its URL as storeid.store_identity gives it, never a token):
-- running the task against another store is refused.
ALTER TABLE tasks ADD COLUMN store TEXT;
