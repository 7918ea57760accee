package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"

	"github.com/devbox-dev/devbox/internal/testworld"
)

// httpsOptions are the flags of the HTTPS server on port 443: the fake
// Messages API and a git smart-HTTP server, each chosen by the request's
// Host, behind one certificate the test's CA signed.
type httpsOptions struct {
	cert, key string // PEM files
	apiHost   string
	apiKey    string
	gitHost   string
	gitToken  string
	gitDir    string
	gitRepos  list
}

func (o *httpsOptions) enabled() bool { return o.cert != "" }

// handler builds the servers. Every request is printed before it is
// answered, with the credentials it carried, so the test sees exactly what
// reached the world:
//
//	api POST /v1/messages x-api-key="…" authorization=""
//	git GET /acme/app.git/info/refs?service=git-upload-pack
func (o *httpsOptions) handler(printf func(string, ...any)) (http.Handler, error) {
	api := &testworld.MessagesAPI{Key: o.apiKey, Reply: "hello from the world's Messages API"}
	var git http.Handler = http.NotFoundHandler()
	if o.gitHost != "" {
		g, err := testworld.NewGitServer(o.gitDir, o.gitToken, o.gitRepos...)
		if err != nil {
			return nil, err
		}
		git = g
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		switch {
		case o.apiHost != "" && strings.EqualFold(host, o.apiHost):
			printf("api %s %s x-api-key=%q authorization=%q\n", r.Method, r.URL.Path, r.Header.Values("X-Api-Key"), r.Header.Values("Authorization"))
			api.ServeHTTP(w, r)
		case o.gitHost != "" && strings.EqualFold(host, o.gitHost):
			printf("git %s %s\n", r.Method, r.URL.RequestURI())
			git.ServeHTTP(w, r)
		default:
			printf("https %s %s host %q: no such server\n", r.Method, r.URL.Path, r.Host)
			http.NotFound(w, r)
		}
	}), nil
}

// serve serves h over TLS on l, printing every accepted connection.
func (o *httpsOptions) serve(l net.Listener, h http.Handler, printf func(string, ...any)) error {
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	tl := tls.NewListener(printingListener{l, printf}, &tls.Config{Certificates: []tls.Certificate{cert}})
	go srv.Serve(tl)
	return nil
}

type printingListener struct {
	net.Listener
	printf func(string, ...any)
}

func (l printingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.printf("conn https %s from %s\n", c.LocalAddr(), c.RemoteAddr())
	}
	return c, err
}
