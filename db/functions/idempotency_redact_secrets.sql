-- idempotency_redact_secrets keeps webhook secrets out of stored
-- idempotent answers, whichever release stores them: every whsec_ secret
-- in an answer of the endpoints' paths is replaced, as it is stored, by
-- its digest, 'sha256' and the base64 of SHA-256 of the secret's text.
-- The digest is as long as the secret (6 + 44 characters), so the stored
-- protobuf stays valid. A replay compares it with the endpoint's secret
-- now (service/webhook, replayedSecret) and never answers a retired one.
CREATE OR REPLACE FUNCTION idempotency_redact_secrets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    at int := 1;
    i int;
    n int;
BEGIN
    LOOP
        i := position('\x77687365635f'::bytea IN substring(NEW.response FROM at)); -- 'whsec_'
        EXIT WHEN i = 0;
        i := at + i - 1;
        n := least(50, length(NEW.response) - i + 1);
        IF n = 50 THEN
            NEW.response := overlay(NEW.response PLACING
                convert_to('sha256' || encode(sha256(substring(NEW.response FROM i FOR 50)), 'base64'), 'UTF8')
                FROM i FOR 50);
        END IF;
        at := i + n;
    END LOOP;
    RETURN NEW;
END
$$;
