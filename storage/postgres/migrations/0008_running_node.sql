-- Which node started a cron run or a /bg task: the application_name of the connection that wrote
-- the row (PgStore's `application_name`; each node of a cluster gives its own). A node starting up
-- takes a row still 'running' as cut off only when that node has no live connection any more, or
-- is itself before its restart (cron.interrupted_runs, background.interrupt_running): a run a live
-- node is running is left to it. Rows written before this step name no node (NULL): cut off, as
-- state.db treats every running row at a start.
ALTER TABLE gateway_cron_runs ADD COLUMN node TEXT;
ALTER TABLE gateway_cron_runs ALTER COLUMN node SET DEFAULT current_setting('application_name');
ALTER TABLE gateway_background_tasks ADD COLUMN node TEXT;
ALTER TABLE gateway_background_tasks ALTER COLUMN node SET DEFAULT current_setting('application_name');
