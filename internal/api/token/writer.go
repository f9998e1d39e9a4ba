package token

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// Writer stores issued tokens. Under load, concurrent token requests share
// one multi-row INSERT and so one commit (group commit in the
// application): the commit, not our code, is the cost of issuance, and
// sharing it lets issuance outrun a bare one-INSERT-per-request handler.
// A request is answered only after the INSERT holding its token has
// committed. With no load a batch is one token and nothing waits.
type Writer struct {
	DB *db.DB
	// Workers is how many batches may be in flight at once; default 4.
	Workers int
	// MaxBatch bounds a batch; default 64.
	MaxBatch int

	ch      chan *pendingToken
	running atomic.Int32
}

type pendingToken struct {
	row  dbsqlc.AccessTokenCreateParams
	done chan error
}

// Insert stores one token and returns when it is committed.
func (w *Writer) Insert(ctx context.Context, row dbsqlc.AccessTokenCreateParams) error {
	if w.running.Load() == 0 {
		return db.Q.AccessTokenCreate(ctx, w.DB.Conn(), row)
	}
	p := &pendingToken{row: row, done: make(chan error, 1)}
	select {
	case w.ch <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run batches inserts until ctx ends. The server starts it; without it,
// Insert writes each token on its own.
func (w *Writer) Run(ctx context.Context) {
	workers, maxBatch := w.Workers, w.MaxBatch
	if workers <= 0 {
		workers = 4
	}
	if maxBatch <= 0 {
		maxBatch = 64
	}
	if w.ch == nil {
		w.ch = make(chan *pendingToken, workers*maxBatch)
	}
	w.running.Add(int32(workers))
	for range workers {
		go w.work(ctx, maxBatch)
	}
}

func (w *Writer) work(ctx context.Context, maxBatch int) {
	defer func() {
		// The last worker out leaves stragglers to be written one by one.
		if w.running.Add(-1) == 0 {
			for {
				select {
				case p := <-w.ch:
					p.done <- db.Q.AccessTokenCreate(context.Background(), w.DB.Conn(), p.row)
				default:
					return
				}
			}
		}
	}()
	batch := make([]*pendingToken, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case p := <-w.ch:
			batch = append(batch, p)
		}
	collect:
		for len(batch) < maxBatch {
			select {
			case p := <-w.ch:
				batch = append(batch, p)
			default:
				break collect
			}
		}
		err := w.insert(batch)
		for _, p := range batch {
			p.done <- err
		}
	}
}

func (w *Writer) insert(batch []*pendingToken) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(batch) == 1 {
		return db.Q.AccessTokenCreate(ctx, w.DB.Conn(), batch[0].row)
	}
	var p dbsqlc.AccessTokenCreateManyParams
	for _, t := range batch {
		p.TokenHashes = append(p.TokenHashes, t.row.TokenHash)
		p.WorkspaceIDs = append(p.WorkspaceIDs, t.row.WorkspaceID)
		p.ClientIDs = append(p.ClientIDs, t.row.ClientID)
		p.Scopes = append(p.Scopes, strings.Join(t.row.Scopes, " "))
		p.CreatedAts = append(p.CreatedAts, t.row.CreatedAt)
		p.ExpiresAts = append(p.ExpiresAts, t.row.ExpiresAt)
		p.SecretGenerations = append(p.SecretGenerations, t.row.SecretGeneration)
	}
	if err := db.Q.AccessTokenCreateMany(ctx, w.DB.Conn(), p); err != nil {
		return fmt.Errorf("insert %d tokens: %w", len(batch), err)
	}
	return nil
}
