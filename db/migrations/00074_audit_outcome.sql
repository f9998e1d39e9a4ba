-- +goose Up

-- Refused management attempts are audited too (issue 20): a pending
-- member, one without settings access or one of another workspace acting
-- on a client, and a change a revoked client refuses. outcome tells a
-- refused attempt from a done action; reason says why it was refused, as
-- a short code the service chooses (never the caller's text), so what a
-- refused attempt stores is bounded: the reason, the action, and ids.
-- Every existing event was a done action. A constant default adds the
-- column without rewriting the table.
ALTER TABLE audit_events
    ADD COLUMN outcome text NOT NULL DEFAULT 'succeeded',
    ADD COLUMN reason text,
    ADD CONSTRAINT audit_events_outcome CHECK (
        outcome IN ('succeeded', 'refused')
        AND (outcome = 'refused') = (reason IS NOT NULL)
        AND length(reason) <= 64);

-- +goose Down
-- Without the column a refused attempt would read as a done action.
DELETE FROM audit_events WHERE outcome = 'refused';
ALTER TABLE audit_events DROP CONSTRAINT audit_events_outcome, DROP COLUMN reason, DROP COLUMN outcome;
