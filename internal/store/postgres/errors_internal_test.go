package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// TestMapErrClassifies: mapErr classifies by SQLSTATE and error type,
// never by text. What passes (a full disk, too many connections, the
// server restarting, a connection that broke) is ErrUnavailable; what does
// not is not; no pgx type escapes.
func TestMapErrClassifies(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("exec: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: "injected"})
	}
	tests := []struct {
		name string
		err  error
		want error // nil: none of the sentinels
	}{
		{"disk full", pg("53100"), rtstore.ErrUnavailable},
		{"insufficient resources", pg("53000"), rtstore.ErrUnavailable},
		{"out of memory", pg("53200"), rtstore.ErrUnavailable},
		{"too many connections", pg("53300"), rtstore.ErrUnavailable},
		{"configuration limit exceeded", pg("53400"), rtstore.ErrUnavailable},
		{"connection exception", pg("08000"), rtstore.ErrUnavailable},
		{"connection failure", pg("08006"), rtstore.ErrUnavailable},
		{"cannot establish connection", pg("08001"), rtstore.ErrUnavailable},
		{"admin shutdown", pg("57P01"), rtstore.ErrUnavailable},
		{"crash shutdown", pg("57P02"), rtstore.ErrUnavailable},
		{"cannot connect now", pg("57P03"), rtstore.ErrUnavailable},
		{"idle session timeout", pg("57P05"), rtstore.ErrUnavailable},
		{"read-only transaction", pg("25006"), rtstore.ErrUnavailable},
		{"serialization failure", pg("40001"), rtstore.ErrUnavailable},
		{"deadlock", pg("40P01"), rtstore.ErrUnavailable},
		{"statement timeout", pg("57014"), rtstore.ErrUnavailable},
		{"database dropped", pg("57P04"), nil},
		{"unique violation", pg("23505"), nil},
		{"syntax error", pg("42601"), nil},
		{"insufficient privilege", pg("42501"), nil},
		{"undefined table", pg("42P01"), rtstore.ErrSchema},
		{"closed connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), rtstore.ErrUnavailable},
		{"closed pool", fmt.Errorf("acquire: %w", puddle.ErrClosedPool), rtstore.ErrUnavailable},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, rtstore.ErrUnavailable},
		{"no descriptors to dial", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}, rtstore.ErrUnavailable},
		{"no rows", pgx.ErrNoRows, rtstore.ErrNotFound},
		{"message only", errors.New("could not extend file: No space left on device"), nil},
		{"closed pool in text only", errors.New("tool said: closed pool, conn closed"), nil},
	}
	s := &Store{schema: "hxd"}
	sentinels := []error{rtstore.ErrUnavailable, rtstore.ErrSchema, rtstore.ErrNotFound}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := s.mapErr(context.Background(), "op", tt.err)
			require.Error(t, got)
			for _, sentinel := range sentinels {
				require.Equal(t, tt.want != nil && errors.Is(tt.want, sentinel), errors.Is(got, sentinel), "%v: %v", sentinel, got)
			}
			var pe *pgconn.PgError
			require.False(t, errors.As(got, &pe), "no pgx type escapes")
		})
	}
}
