// Package secrets keeps webhook signing secrets at rest: sealed
// (internal/security/sealed, AES-256-GCM under PARTNER_SECRET_KEY) and
// bound to their workspace and endpoint, so that a dump, a backup or a
// standby of the database holds none in the clear.
//
// Release 1.1.0 signs with the endpoints' text columns. While a rolling
// upgrade from it may still run one of its replicas, those columns keep a
// plaintext copy (webhook_secrets.plaintext_kept, migration 00160); the
// operator ends that with `partnerapi migrate --seal-webhook-secrets`, and
// a database that had no endpoint when it was migrated never keeps one.
// Sweep seals what 1.1.0 wrote, seals again what an older key sealed, and
// empties the copies no longer kept.
package secrets

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/security/sealed"
)

// Box seals and opens the secrets of endpoints.
type Box struct {
	Keys *sealed.Keyring
}

// ad binds a sealed secret to its endpoint: a value copied into another
// row does not open there.
func ad(workspace, endpoint uuid.UUID) []byte {
	b := make([]byte, 0, 32)
	b = append(b, workspace[:]...)
	return append(b, endpoint[:]...)
}

// Seal seals an endpoint's secret.
func (b Box) Seal(workspace, endpoint uuid.UUID, secret string) []byte {
	return b.Keys.Seal([]byte(secret), ad(workspace, endpoint))
}

// Open returns an endpoint's secret: the sealed value when there is one,
// else the plaintext copy release 1.1.0 wrote. "" means none (no previous
// secret, or a copy emptied with no sealed value: never for a current
// secret).
func (b Box) Open(workspace, endpoint uuid.UUID, value []byte, plain *string) (string, error) {
	if value != nil {
		s, err := b.Keys.Open(value, ad(workspace, endpoint))
		if err != nil {
			return "", fmt.Errorf("open webhook secret: %w", err)
		}
		return string(s), nil
	}
	if plain == nil {
		return "", nil
	}
	return *plain, nil
}

// Digest is what a stored idempotent answer keeps instead of a secret: as
// db/functions/idempotency_redact_secrets.sql writes it, "sha256" and the
// base64 of SHA-256 of the secret's text, as long as the secret.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256" + base64.StdEncoding.EncodeToString(sum[:])
}

// Matches reports, in constant time, whether stored (a digest, or a
// secret an answer stored before migration 00160) is secret's.
func Matches(stored, secret string) bool {
	if secret == "" {
		return false
	}
	if !strings.HasPrefix(stored, "sha256") {
		return subtle.ConstantTimeCompare([]byte(stored), []byte(secret)) == 1
	}
	return subtle.ConstantTimeCompare([]byte(stored), []byte(Digest(secret))) == 1
}

// SweepBatch is how many endpoints one transaction of Sweep seals.
const SweepBatch = 100

// Sweep seals every endpoint's secrets that need it (see the package
// comment), SweepBatch endpoints a transaction, and returns how many it
// sealed. A value no key opens (a key removed before its values were
// sealed again) is skipped and counted in unopened; it stays as it is.
func Sweep(ctx context.Context, d *db.DB, b Box) (done, unopened int, err error) {
	var afterWS, afterID uuid.UUID
	for {
		n := 0
		err := d.WithTx(ctx, func(tx db.DBTX) error {
			rows, err := db.Q.WebhookSecretsToSeal(ctx, tx, dbsqlc.WebhookSecretsToSealParams{
				AfterWorkspace: afterWS, AfterID: afterID, KeyID: b.Keys.KeyID(), MaxRows: SweepBatch,
			})
			if err != nil {
				return fmt.Errorf("find webhook secrets to seal: %w", err)
			}
			n = len(rows)
			for _, r := range rows {
				afterWS, afterID = r.WorkspaceID, r.ID
				cur, err := b.Open(r.WorkspaceID, r.ID, r.SecretSealed, &r.Secret)
				if err != nil || cur == "" {
					unopened++
					continue
				}
				prev, err := b.Open(r.WorkspaceID, r.ID, r.PreviousSecretSealed, r.PreviousSecret)
				if err != nil {
					unopened++
					continue
				}
				arg := dbsqlc.WebhookSecretsSealParams{WorkspaceID: r.WorkspaceID, ID: r.ID, SecretSealed: b.Seal(r.WorkspaceID, r.ID, cur)}
				if prev != "" {
					arg.PreviousSecretSealed = b.Seal(r.WorkspaceID, r.ID, prev)
				}
				if err := db.Q.WebhookSecretsSeal(ctx, tx, arg); err != nil {
					return fmt.Errorf("seal webhook secrets: %w", err)
				}
				done++
			}
			return nil
		})
		if err != nil {
			return done, unopened, err
		}
		if n < SweepBatch {
			return done, unopened, nil
		}
	}
}
