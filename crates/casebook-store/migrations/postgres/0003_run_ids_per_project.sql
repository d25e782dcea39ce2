-- A run's id is unique within its project, as in the embedded store's migration 0010.
ALTER TABLE runs DROP CONSTRAINT runs_id_key;
ALTER TABLE runs ADD CONSTRAINT runs_project_id_key UNIQUE (project, id);
