//go:build !unix

package device

const oNoFollow = 0
