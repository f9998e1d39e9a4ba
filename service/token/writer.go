package token

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/work/groupcommit"
)

// Writer stores issued tokens. Under load, concurrent token requests share
// one multi-row INSERT and so one commit ([groupcommit]): the commit, not
// our code, is the cost of issuance. A request is answered only after the
// INSERT holding its token has committed.
type Writer struct {
	DB *db.DB
	// MaxBatch bounds a batch; default 64.
	MaxBatch int

	once sync.Once
	q    groupcommit.Queue[dbsqlc.AccessTokenCreateParams, error]
}

// Insert stores one token and returns when it is committed. A database
// that does not answer in time is [db.ErrUnavailable].
func (w *Writer) Insert(ctx context.Context, row dbsqlc.AccessTokenCreateParams) error {
	w.init()
	err, cerr := w.q.Do(ctx, row)
	if cerr != nil {
		return cerr
	}
	if err == errAlone {
		// The batch wrote nothing: this token is written on its own, under
		// this request's own budget.
		return db.Q.AccessTokenCreate(ctx, w.DB.Conn(), row)
	}
	return err
}

// errAlone answers each caller of a batch that failed without writing
// anything ([db.NotApplied]): one token's failure, or one caller's spent
// budget, must not fail the others' tokens.
var errAlone = errors.New("token batch not written; insert alone")

// Run batches inserts until ctx ends, then returns once every queued token
// is written. The server runs it; without it, Insert writes each token on
// its own.
func (w *Writer) Run(ctx context.Context) error {
	w.init()
	return w.q.Run(ctx)
}

func (w *Writer) init() {
	w.once.Do(func() { w.q.Write, w.q.MaxBatch = w.insert, w.MaxBatch })
}

// insert writes one batch; every token of it shares the outcome.
func (w *Writer) insert(ctx context.Context, batch []dbsqlc.AccessTokenCreateParams) []error {
	errs := make([]error, len(batch))
	var err error
	if len(batch) == 1 {
		err = db.Q.AccessTokenCreate(ctx, w.DB.Conn(), batch[0])
	} else {
		var p dbsqlc.AccessTokenCreateManyParams
		for _, t := range batch {
			p.TokenHashes = append(p.TokenHashes, t.TokenHash)
			p.WorkspaceIDs = append(p.WorkspaceIDs, t.WorkspaceID)
			p.ClientIDs = append(p.ClientIDs, t.ClientID)
			p.Scopes = append(p.Scopes, strings.Join(t.Scopes, " "))
			p.CreatedAts = append(p.CreatedAts, t.CreatedAt)
			p.ExpiresAts = append(p.ExpiresAts, t.ExpiresAt)
			p.SecretGenerations = append(p.SecretGenerations, t.SecretGeneration)
		}
		if err = db.Q.AccessTokenCreateMany(ctx, w.DB.Conn(), p); err != nil {
			err = fmt.Errorf("insert %d tokens: %w", len(batch), err)
		}
	}
	if err != nil && len(batch) > 1 && db.NotApplied(err) {
		err = errAlone
	}
	for i := range errs {
		errs[i] = err
	}
	return errs
}
