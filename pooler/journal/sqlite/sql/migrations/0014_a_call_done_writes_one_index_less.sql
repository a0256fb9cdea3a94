-- A step waits for the calls of the steps it refers to that are still open (work_open) or ended
-- without completing (work_failed): a seek into each for every step referred to.  The index of
-- both at once cost every call planned one more index entry and every call done one more page
-- written, for no read the two do not answer as fast.
DROP INDEX IF EXISTS work_unsettled;
