-- Several nodes: every change of a scheduled job (a /cron command, the control socket's cron.*, the
-- agent's cron tool, a claim or the end of a run, a forget, a start-up's interrupted runs) NOTIFYs
-- channel `hermes_cron` with the job's id, so every node's in-memory jobs (gateway.scheduler.Jobs)
-- and the scheduler role's holder hear of it at once (gateway.daemon.cron_sync).
-- A trigger rather than a pg_notify in each storage function: no write to this table, present or
-- future, from whichever function or tool, can forget it; and a NOTIFY is delivered at COMMIT
-- (never for a rolled-back change), so the listener reads the committed row. Identical
-- notifications in one transaction are folded into one by PostgreSQL (a claim that writes the job
-- twice wakes each node once).
CREATE FUNCTION hermes_cron_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('hermes_cron', OLD.id);
    ELSE
        PERFORM pg_notify('hermes_cron', NEW.id);
        IF TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id THEN
            PERFORM pg_notify('hermes_cron', OLD.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER gateway_cron_jobs_notify
    AFTER INSERT OR UPDATE OR DELETE ON gateway_cron_jobs
    FOR EACH ROW EXECUTE FUNCTION hermes_cron_notify();
