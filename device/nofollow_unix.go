//go:build unix

package device

import "syscall"

// oNoFollow makes an open fail on a symlink: a file the device keeps is
// its own, not one a link planted in its directory points at.
const oNoFollow = syscall.O_NOFOLLOW
