-- What restoring a checkpoint of a version into another needs (docs/fault-tolerance.md,
-- "Changing a job"): each version's operator profiles (JSON; NULL for versions stored before
-- this, which upgrade only into the same logic), and the actions an upgrade gave for the
-- restore of the savepoint it starts from (JSON StateActions; NULL: none).
ALTER TABLE job_versions ADD COLUMN operator_profiles TEXT;
ALTER TABLE job_versions ADD COLUMN state_actions TEXT;
