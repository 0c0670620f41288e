// Package atomicfile replaces a file so that a reader, or a crash, sees the
// old content or the new, never a part. It is accelkit's one policy for
// output files (devalloc's snapshots, accbench's results, graphpass -out):
//
//  1. The new content goes to a temporary file in the destination's own
//     directory (never os.TempDir, which may be another file system),
//     created exclusively (O_EXCL) under a random name beginning with
//     "." and the destination's name.
//  2. It is written in full and fsynced, then renamed over the
//     destination.
//  3. A destination that exists keeps its permission bits exactly (even
//     bits the umask would clear); a new one gets the caller's perm less
//     the umask.
//  4. The directory is fsynced after the rename, so that the rename
//     survives a crash; where that fails the error says the file was
//     written but may be lost.
//  5. A destination that is not a regular file is refused before anything
//     is written: a symbolic link is neither written through nor
//     replaced (it is the user's, and replacing it would delete it), and a
//     directory or device is left alone. Errors wrap ErrNotRegular.
//  6. On Windows, where a rename fails while another process (a virus
//     scanner, an indexer, a reader without FILE_SHARE_DELETE) holds the
//     destination open, the rename is retried for up to two seconds on
//     ERROR_ACCESS_DENIED and ERROR_SHARING_VIOLATION, as the go command's
//     own robustio does. Directories cannot be fsynced there; NTFS
//     journals the rename.
//
// On any failure before the rename the destination is untouched and the
// temporary file removed. A link swapped in between the check and the
// rename is replaced, never written through: the rename acts on the name.
//
// WriteFile is the whole policy in one call. Create returns the pending
// file for callers that write several files and rename them only once all
// are written; CreateIn and WriteFileIn do the same inside an os.Root, so
// that no name leads out of a directory the program owns. On Unix systems
// the temporary file and rename are github.com/google/renameio/v2's
// (renameio does not build on Windows, where this package has its own).
package atomicfile
