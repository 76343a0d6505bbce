-- /handoff on several nodes: the node that receives the command may not hold the target
-- platform's connection. It leaves the row `pending`; the node that holds it claims it. A NOTIFY
-- at COMMIT of every insert and every change of state wakes both sides: the holder (a new
-- `pending` row for its platform) and the node that waits to tell the source chat (its row
-- `completed` or `failed`). Payload: "<target platform>\t<id>\t<state>".

CREATE FUNCTION hermes_handoff_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hermes_handoff', NEW.target_platform || E'\t' || NEW.id || E'\t' || NEW.state);
    RETURN NULL;
END
$$;

CREATE TRIGGER gateway_handoffs_notify
    AFTER INSERT OR UPDATE OF state ON gateway_handoffs
    FOR EACH ROW EXECUTE FUNCTION hermes_handoff_notify();

-- The router asks, on a cluster, whether a chat's session is being handed off (any node's row).
CREATE INDEX idx_gateway_handoffs_live_source ON gateway_handoffs(source_key) WHERE state IN ('pending', 'claimed');
-- What the holder of a platform claims: the pending rows for it.
CREATE INDEX idx_gateway_handoffs_pending_target ON gateway_handoffs(target_platform) WHERE state = 'pending';
