-- ServerKeyEnsure stores a key under a name unless one is there already, and
-- returns the stored key, so every replica agrees on it.
-- name: ServerKeyEnsure :one
WITH inserted AS (
    INSERT INTO server_keys (name, key) VALUES (@name, @key)
    ON CONFLICT (name) DO NOTHING
    RETURNING key
)
SELECT key FROM inserted
UNION ALL
SELECT key FROM server_keys WHERE name = @name
LIMIT 1;
