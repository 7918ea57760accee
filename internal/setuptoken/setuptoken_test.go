package setuptoken

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/term"
)

const token = "sk-ant-oat01-Zx9_aQ3-" + "b7LmN0pQrStUvWxYz0123456789abcdefABCDEF_-ghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL-AA"

// TestRedactor: a token is replaced however the output is split into
// writes, and whatever surrounds it.
func TestRedactor(t *testing.T) {
	for _, tc := range []struct{ in, want, token string }{
		{"Your token:\n" + token + "\nStore it.\n", "Your token:\n" + Shown + "\nStore it.\n", token},
		{"\x1b[1m" + token + "\x1b[0m done", "\x1b[1m" + Shown + "\x1b[0m done", token},
		{"at the end " + token, "at the end " + Shown, token},
		{"sk-ant-api03-key sk-sk-ant-oa and ssk-ant-oat", "sk-ant-api03-key sk-sk-ant-oa and s" + Shown, ""},
		{"twice " + token + " " + token, "twice " + Shown + " " + Shown, token},
		{"no token here: sk-ant-oat… is what it looks like", "no token here: " + Shown + "… is what it looks like", ""},
	} {
		// Every split into two writes, and one byte at a time.
		splits := [][]string{}
		for i := 0; i <= len(tc.in); i++ {
			splits = append(splits, []string{tc.in[:i], tc.in[i:]})
		}
		splits = append(splits, strings.Split(tc.in, ""))
		for _, parts := range splits {
			var out bytes.Buffer
			r := &Redactor{W: &out}
			for _, p := range parts {
				// What reached the screen so far never holds the token's
				// first 12 bytes, even mid-way.
				r.Write([]byte(p))
				if strings.Contains(out.String(), token[:12]) {
					t.Fatalf("%q split %q: the screen showed the token's start: %q", tc.in, parts, out.String())
				}
			}
			r.Close()
			if out.String() != tc.want || r.Token() != tc.token {
				t.Fatalf("%q split %q: screen %q token %q; want %q, %q", tc.in, parts, out.String(), r.Token(), tc.want, tc.token)
			}
		}
	}
}

// standInEnv makes the test binary the stand-in for `claude setup-token`.
const standInEnv = "DEVBOX_TEST_SETUP_TOKEN_STANDIN"

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) != "" {
		os.Exit(standIn())
	}
	os.Exit(m.Run())
}

// standIn mimics Claude Code's setup-token: it wants a terminal, prints a
// sign-in URL, reads the code the user pastes, and prints a token.
func standIn() int {
	if !term.IsTerminal(0) || !term.IsTerminal(1) {
		fmt.Println("stand-in: not a terminal")
		return 3
	}
	w, _, _ := term.GetSize(1)
	fmt.Printf("Terminal: %d columns\r\nBrowser didn't open? Use the url below to sign in:\r\n\r\nhttps://claude.test/oauth/authorize?code=true&state=abc\r\n\r\nPaste code here if prompted > ", w)
	code, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(code) != "CODE-42#state" {
		fmt.Printf("\r\nOAuth error: invalid code %q\r\n", code)
		return 1
	}
	fmt.Printf("\r\n\x1b[32m✓ Long-lived authentication token created successfully!\x1b[39m\r\n\r\nYour OAuth token (valid for 1 year):\r\n\r\n\x1b[33m%s\x1b[39m\r\n\r\nStore this token securely. You won't be able to see it again.\r\n", os.Getenv(standInEnv))
	return 0
}

// TestRun runs the stand-in on a pseudo-terminal: the user sees the URL
// and the code they typed, the token comes back, and the screen never
// shows it.
func TestRun(t *testing.T) {
	t.Setenv(standInEnv, token)
	var screen bytes.Buffer
	got, err := Run(context.Background(), Options{Command: []string{os.Args[0]}, In: strings.NewReader("CODE-42#state\n"), Out: &screen})
	if err != nil {
		t.Fatalf("Run: %v\nscreen:\n%s", err, screen.String())
	}
	if got != token {
		t.Errorf("token %q, want %q", got, token)
	}
	s := screen.String()
	for _, want := range []string{"https://claude.test/oauth/authorize", "CODE-42#state", Shown, fmt.Sprintf("Terminal: %d columns", MinWidth)} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []string{token, token[len(TokenPrefix):], token[len(token)-20:]} {
		if strings.Contains(s, bad) {
			t.Errorf("screen shows the token (%q):\n%s", bad, s)
		}
	}
	t.Logf("screen:\n%s", s)

	// A wrong code: the program fails, nothing comes back.
	screen.Reset()
	if got, err := Run(context.Background(), Options{Command: []string{os.Args[0]}, In: strings.NewReader("nope\n"), Out: &screen}); err == nil || got != "" ||
		!strings.Contains(err.Error(), "nothing was stored") {
		t.Errorf("wrong code: %q, %v", got, err)
	}
	// A program that prints no token.
	if got, err := Run(context.Background(), Options{Command: []string{"echo", "hello"}, In: strings.NewReader(""), Out: &screen}); err == nil || got != "" ||
		!strings.Contains(err.Error(), "printed no token") {
		t.Errorf("no token: %q, %v", got, err)
	}
}
