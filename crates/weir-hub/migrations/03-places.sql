-- The places a version's job touches (its sources' and sinks' paths and URLs, its checkpoint
-- directory), as {"paths": [...], "urls": [...]}: lanes are placed only on Agents whose
-- allow-lists take them all. Versions stored before this know none (placed anywhere).
ALTER TABLE job_versions ADD COLUMN touches TEXT NOT NULL DEFAULT '{"paths":[],"urls":[]}';
