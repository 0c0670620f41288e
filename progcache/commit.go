package progcache

import "time"

// The retry bounds of retryRename: about a quarter of a second in all.
const (
	commitRetries    = 8
	commitFirstPause = time.Millisecond
)

// retryRename calls rename until it succeeds, fails with an error that
// retryable rejects, or has been retried commitRetries times, sleeping a
// doubling pause from commitFirstPause between tries. Windows commits use
// it (commit_windows.go); it is portable so its policy is tested
// everywhere.
func retryRename(rename func() error, retryable func(error) bool, sleep func(time.Duration)) error {
	pause := commitFirstPause
	for i := 0; ; i++ {
		err := rename()
		if err == nil || i == commitRetries || !retryable(err) {
			return err
		}
		sleep(pause)
		pause *= 2
	}
}
