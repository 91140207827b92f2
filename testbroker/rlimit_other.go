//go:build !unix

package testbroker

func raiseFDLimit() error { return nil }
