package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener is a session of its own on the direct URL ([Config.DirectURL])
// that receives notifications: LISTEN needs a session, which a
// transaction pooler does not keep.
type Listener struct {
	d    *DB
	conn *pgx.Conn
}

// Listen opens a listening session. listen runs the LISTEN statement (a
// generated query) on it.
func (d *DB) Listen(ctx context.Context, listen func(context.Context, DBTX) error) (*Listener, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, d.acquire+d.statement, errAcquireTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, d.direct.Copy())
	if err != nil {
		return nil, d.interpret(cctx, nil, fmt.Errorf("connect listener: %w", err))
	}
	l := &Listener{d: d, conn: conn}
	if err := listen(ctx, bounded{d: d, inner: conn, conn: conn}); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return l, nil
}

// Wait returns the payload of the next notification, or an error when ctx
// ends or the session is lost.
func (l *Listener) Wait(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", l.d.interpret(ctx, l.conn, fmt.Errorf("wait for notification: %w", err))
	}
	return n.Payload, nil
}

// PID is the session's backend process id (tests freeze it).
func (l *Listener) PID() uint32 { return l.conn.PgConn().PID() }

// Close ends the session. It does not wait for a server that does not
// answer.
func (l *Listener) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = l.conn.Close(ctx)
}
