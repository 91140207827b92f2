package proxystorm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// ControlToken is the API's bearer token: required where the API listens
// (addr) beyond loopback, from a file or the environment
// (HERDGUARD_CONTROL_TOKEN), never a flag.
func ControlToken(addr, file string, getenv func(string) string) (string, error) {
	token := strings.TrimSpace(getenv("HERDGUARD_CONTROL_TOKEN"))
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("-control-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if addr == "" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-control %q: want HOST:PORT", addr)
	}
	ip := net.ParseIP(host)
	if token == "" && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return "", fmt.Errorf("-control %s is beyond loopback: the API needs a bearer token (-control-token-file, or HERDGUARD_CONTROL_TOKEN)", addr)
	}
	return token, nil
}

// ServeControl serves h, the control API, on addr until stop; served hears
// of each GET /report answered with the report.
func ServeControl(addr string, h http.Handler, served chan<- struct{}, stdout io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-control: %w", err)
	}
	fmt.Fprintf(stdout, "control API: http://%s/status\n", ln.Addr())
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if r.Method == http.MethodGet && r.URL.Path == "/report" && sw.status == http.StatusOK {
			select {
			case served <- struct{}{}:
			default:
			}
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// statusWriter keeps the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
