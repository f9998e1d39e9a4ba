-- webhook_secret_unseal_stale keeps a sealed secret from outliving its
-- text column: release 1.1.0 rotates a secret by setting the text columns
-- only, and the sealed one would then hold the retired secret. A sealed
-- column whose text column an UPDATE changed without it is emptied, so
-- that the text wins until the sweep seals it (service/webhook, Seal).
CREATE OR REPLACE FUNCTION webhook_secret_unseal_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.secret IS DISTINCT FROM OLD.secret AND NEW.secret_sealed IS NOT DISTINCT FROM OLD.secret_sealed THEN
        NEW.secret_sealed := NULL;
    END IF;
    IF NEW.previous_secret IS DISTINCT FROM OLD.previous_secret
       AND NEW.previous_secret_sealed IS NOT DISTINCT FROM OLD.previous_secret_sealed THEN
        NEW.previous_secret_sealed := NULL;
    END IF;
    RETURN NEW;
END
$$;
