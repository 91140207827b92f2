package faultproxy

// SniffConnect is sniffConnect, for the tests.
var SniffConnect = sniffConnect
