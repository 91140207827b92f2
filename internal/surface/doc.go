// Package surface holds one test: every exported identifier of the
// packages a user imports has a caller outside its package that is not a
// test, or is on the list of what a user needs without one (a sentinel to
// compare against, an option or a documented shape), with the reason.
package surface
