package atomicfile

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestRetry: a rename refused because another process holds the file is
// retried until it succeeds; any other error is returned at once.
func TestRetry(t *testing.T) {
	calls := 0
	err := retry(func() error {
		if calls++; calls < 4 {
			return &os.LinkError{Op: "rename", Err: errSharingViolation}
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("retry = %v after %d calls, want success on the 4th", err, calls)
	}
	calls = 0
	err = retry(func() error { calls++; return &os.LinkError{Op: "rename", Err: syscall.ERROR_FILE_NOT_FOUND} })
	if !errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) || calls != 1 {
		t.Fatalf("retry = %v after %d calls, want the error at once", err, calls)
	}
}
