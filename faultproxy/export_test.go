package faultproxy

// SniffConnect is sniffConnect, for the tests.
var SniffConnect = sniffConnect

// ConnectClientID and ParseConnect are connectClientID and parseConnect,
// for the tests.
var (
	ConnectClientID = connectClientID
	ParseConnect    = parseConnect
)
