//go:build !unix

package publisher

const oNoFollow = 0
