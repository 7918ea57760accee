//go:build linux

package escape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// gatewayAttempts are requests the credential gateway must refuse itself
// (405 or 400 with its X-Devbox-Gateway: refused mark) rather than forward
// with the user's credential on them: TRACE echoes the credential back, a
// protocol switch hands the upstream connection to the agent raw, a key
// in the query is a foreign identity.
var gatewayAttempts = []struct{ name, request string }{
	{"credential gateway: TRACE", "TRACE /v1/messages HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"},
	{"credential gateway: CONNECT", "CONNECT /v1/messages HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"},
	{"credential gateway: Upgrade h2c", "GET /v1/messages HTTP/1.1\r\nHost: %s\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"},
	{"credential gateway: Upgrade websocket", "GET /v1/messages HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"},
	{"credential gateway: HTTP/2 prior knowledge", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"},
	{"credential gateway: a key in the query", "POST /v1/messages?api_key=devbox-escape HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"},
	{"credential gateway: service= twice for git", "GET /git/x.test/a/b.git/info/refs?service=git-upload-pack&service=git-receive-pack HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"},
}

// gatewayRefuses sends one raw request to the gateway at addr. Blocked
// (an error) only when the gateway answered HTTP/1.x with its own refusal
// (4xx and X-Devbox-Gateway: refused); any other answer may come from
// beyond it: an escape.
func gatewayRefuses(ctx context.Context, addr, request string) error {
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return invalid("the gateway at %s did not connect, so the check proves nothing: %v", addr, err)
	}
	defer c.Close()
	if strings.Contains(request, "%s") {
		request = fmt.Sprintf(request, addr)
	}
	if _, err := io.WriteString(c, request); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	br := bufio.NewReader(c)
	head, _ := br.Peek(9)
	if len(head) > 0 && !strings.HasPrefix(string(head), "HTTP/1.") {
		return escaped("the gateway answered in another protocol: %q", head)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.Header.Get("X-Devbox-Gateway") == "refused" {
		return fmt.Errorf("refused by the gateway: %s", resp.Status)
	}
	return escaped("answered %s (not the gateway's refusal)", resp.Status)
}

// connectProtected connects to a protected name's address: the name
// resolves (the policy allows it), the connection must be refused.
func connectProtected(ctx context.Context, hostport string) error {
	_, _, addr, err := resolveHostPort(ctx, hostport)
	if err != nil {
		return err
	}
	return connectTCP(ctx, addr)
}
