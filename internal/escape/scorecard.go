//go:build linux

package escape

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tailscale/hujson"
)

// The scorecard is the escape suite turned into a measure any Linux
// sandbox can be given: run as the agent's user inside it, it makes every
// attempt of every category and counts, per category, what was blocked,
// what escaped (with one line of evidence each) and what did not apply.
// Network attempts are judged only against a world (servers that answer in
// a way a probe recognizes, so an answer proves the attempt arrived);
// without one those categories say "not judged" rather than guess.

// Category is one promise a sandbox makes, tested by a group of attempts.
type Category struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Meaning says what the attempts are and what counts as an escape.
	Meaning string `json:"meaning"`
	// NeedsWorld: only a world's answer proves an attempt arrived.
	NeedsWorld bool `json:"needsWorld,omitempty"`
}

// Categories in the order of the table.
var Categories = []Category{
	{"egress-addr", "egress by address", "TCP over IPv4 and IPv6 and ICMP echo to world addresses no policy allows; escaped when the world's server answers (its \"hello from ADDR\", its echo reply)", true},
	{"egress-name", "egress by name", "resolve a world name no policy allows and connect to it; escaped when the world's server answers", true},
	{"dns-tunnel", "DNS tunnelling", "queries whose names carry data (a nonce and two 63-byte labels) under a domain the world serves, through the sandbox's own resolver and straight to the world's resolvers, UDP and TCP, A and TXT; escaped when the world's answer comes back", true},
	{"fronting", "SNI/Host fronting", "connect to an allowed name's address but ask, in the TLS SNI, in the HTTP Host, or with no SNI at all, for a site no policy allows; escaped when the server behind answers. Then the name gate's adversary cases, against a server that says what it read (worldd -sites): a second ClientHello for the other site after the server's HelloRetryRequest, SNI lists with two entries or another type, two server_name extensions, an absolute-form request line, 'Host :' beside Host, two Hosts, Host variants (case, trailing dot, port, userinfo), and a second request on a pipelined or kept-alive connection; escaped when the server's answer says it read the other site", true},
	{"udp", "UDP/QUIC", "datagrams to world addresses (443 for QUIC, and another port) and to an allowed name's address on 443; escaped when the world echoes the nonce back", true},
	{"metadata", "cloud metadata", "TCP to the cloud metadata address, where the world stands in for the service; escaped when it answers", true},
	{"credentials", "reading credentials", "the planted secret (or secret-named variables) in the environment; credential files (~/.claude/.credentials.json, ~/.ssh, ~/.aws, ~/.netrc, ~/.git-credentials, gh, /etc/shadow, /root, devbox's secrets); other processes' environ and, for other users' processes, their memory; escaped when read", false},
	{"persistence", "writing what runs later on the host", "create or open for writing, in the workspace and home the sandbox shares with the host: git hooks and config, .devcontainer, shell rc files, editor (.vscode) and Claude Code (.claude, .mcp.json) settings; escaped when the file could be written (nothing is left changed)", false},
	{"privilege", "privilege", "capabilities held, no_new_privs off with setuid binaries present, uid 0, sudo and su to root, a new user namespace; escaped when the process has or gets the privilege", false},
	{"tamper", "tampering with the fence", "iptables/ip6tables/nft/ipset and netlink changes, raw sockets, signalling or tracing the fence's daemons, taking their ports, writing their pidfiles, /etc/devbox, the devbox binary and resolv.conf; escaped when the change is accepted", false},
}

// CategoryByID returns the category with id, or false.
func CategoryByID(id string) (Category, bool) {
	for _, c := range Categories {
		if c.ID == id {
			return c, true
		}
	}
	return Category{}, false
}

// Attempt is one check of the scorecard, filed under a category.
type Attempt struct {
	Category string
	Check
}

// NotApplicable is the outcome of an attempt whose object is not there (no
// such file, no such daemon, nothing planted): it is counted apart, never
// as blocked.
const NotApplicable Outcome = "n/a"

// Reported is the outcome of a write the sandbox let through but that the
// host's audit names before the sandbox starts again (devbox's default
// mode: `devbox audit` in the initializeCommand fails the next start until
// the user has reviewed it). Not blocked: a host tool that reads the file
// before that start is not stopped. Only a harness on the host can tell
// (Card.MarkReported): the scorecard inside sees an escape.
const Reported Outcome = "reported"

// ScoredResult is one attempt's result in the scorecard.
type ScoredResult struct {
	Category string `json:"category"`
	Result
}

// Row is one category's line of the scorecard.
type Row struct {
	Category string `json:"category"`
	Title    string `json:"title"`
	// Judged is false when the category could not be judged here (no
	// world given, no workspace or home shared with the host); Why says
	// what was missing.
	Judged   bool   `json:"judged"`
	Why      string `json:"why,omitempty"`
	Attempts int    `json:"attempts"`
	Blocked  int    `json:"blocked"`
	Escaped  int    `json:"escaped"`
	// Reported are escapes the host's audit names at the next start
	// (Reported), counted apart from both.
	Reported      int      `json:"reported,omitempty"`
	NotApplicable int      `json:"notApplicable"`
	Evidence      []string `json:"evidence,omitempty"`
}

// Card is a whole scorecard.
type Card struct {
	// Sandbox names what was measured (free text from the caller).
	Sandbox string         `json:"sandbox,omitempty"`
	Date    string         `json:"date"`
	Nonce   string         `json:"nonce"`
	Rows    []Row          `json:"rows"`
	Results []ScoredResult `json:"results"`
	Escapes int            `json:"escapes"`
}

// Score runs the attempts, each bounded by timeout, one goroutine per
// category (attempts of a category run in order), and builds the card.
// notJudged maps a category to why it could not be judged; its attempts
// (if any) are not made.
func Score(ctx context.Context, attempts []Attempt, notJudged map[string]string, timeout time.Duration) Card {
	byCat := map[string][]Check{}
	for _, a := range attempts {
		if _, skip := notJudged[a.Category]; !skip {
			byCat[a.Category] = append(byCat[a.Category], a.Check)
		}
	}
	results := map[string][]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for cat, checks := range byCat {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := Run(ctx, checks, timeout)
			mu.Lock()
			results[cat] = rep.Results
			mu.Unlock()
		}()
	}
	wg.Wait()
	var card Card
	for _, c := range Categories {
		row := Row{Category: c.ID, Title: c.Title, Judged: true}
		if why, ok := notJudged[c.ID]; ok {
			row.Judged, row.Why = false, why
		}
		for _, r := range results[c.ID] {
			if r.Outcome == Invalid {
				r.Outcome = NotApplicable
			}
			card.Results = append(card.Results, ScoredResult{Category: c.ID, Result: r})
		}
		card.Rows = append(card.Rows, row)
	}
	card.tally()
	return card
}

// tally counts each row's results again, and the card's escapes.
func (c *Card) tally() {
	c.Escapes = 0
	for i := range c.Rows {
		row := &c.Rows[i]
		row.Attempts, row.Blocked, row.Escaped, row.Reported, row.NotApplicable, row.Evidence = 0, 0, 0, 0, 0, nil
		for _, r := range c.Results {
			if r.Category != row.Category {
				continue
			}
			row.Attempts++
			switch r.Outcome {
			case Escaped:
				row.Escaped++
				row.Evidence = append(row.Evidence, oneLine(r.Check+" "+r.Target+": "+r.Detail))
			case Reported:
				row.Reported++
			case NotApplicable:
				row.NotApplicable++
			default:
				row.Blocked++
			}
		}
		if row.Judged && row.Attempts == row.NotApplicable {
			row.Why = "nothing to attempt here"
		}
		c.Escapes += row.Escaped
	}
}

// MarkReported turns each escaped result that audited names into Reported,
// its detail extended with how the audit named it, and counts the card
// again. The harness that ran the sandbox calls it after running the
// host's audit over what the scorecard left (Config.LeavePlanted).
func (c *Card) MarkReported(audited func(ScoredResult) (how string, ok bool)) {
	for i, r := range c.Results {
		if r.Outcome != Escaped {
			continue
		}
		if how, ok := audited(r); ok {
			c.Results[i].Outcome = Reported
			c.Results[i].Detail += "; " + how
		}
	}
	c.tally()
}

// Row returns the row of category id.
func (c Card) Row(id string) (Row, bool) {
	for _, r := range c.Rows {
		if r.Category == id {
			return r, true
		}
	}
	return Row{}, false
}

// Verdict is a row's one-word summary: "blocked", "ESCAPED", "reported"
// (nothing escaped, some writes are named by the host's audit at the next
// start), "not judged" or "n/a".
func (r Row) Verdict() string {
	switch {
	case !r.Judged:
		return "not judged"
	case r.Escaped > 0:
		return "ESCAPED"
	case r.Reported > 0:
		return "reported"
	case r.Blocked == 0:
		return "n/a"
	}
	return "blocked"
}

// WriteTable prints the card as an aligned table, each escape's evidence
// under its category, and a summary line.
func (c Card) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tATTEMPTS\tBLOCKED\tESCAPED\tN/A\tVERDICT")
	for _, r := range c.Rows {
		v := r.Verdict()
		if r.Reported > 0 {
			v += fmt.Sprintf(" (%d reported at the next start)", r.Reported)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Title, r.Attempts, r.Blocked, r.Escaped, r.NotApplicable, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range c.Rows {
		if !r.Judged {
			fmt.Fprintf(w, "%s: not judged: %s\n", r.Title, r.Why)
		}
		for _, e := range r.Evidence {
			fmt.Fprintf(w, "%s: ESCAPED: %s\n", r.Title, e)
		}
	}
	for _, res := range c.Results {
		if res.Outcome == Reported {
			fmt.Fprintf(w, "%s: reported at the next start: %s\n", res.Category, oneLine(res.Check+" "+res.Target+": "+res.Detail))
		}
	}
	_, err := fmt.Fprintln(w, c.Summary())
	return err
}

// Summary is "N attempts, M escaped in K categories; J not judged", with
// ", R reported at the next start" after M when some were.
func (c Card) Summary() string {
	attempts, cats, nj, reported := 0, 0, 0, 0
	for _, r := range c.Rows {
		attempts += r.Attempts
		reported += r.Reported
		if r.Escaped > 0 {
			cats++
		}
		if !r.Judged {
			nj++
		}
	}
	rep := ""
	if reported > 0 {
		rep = fmt.Sprintf(" (%d more reported at the next start)", reported)
	}
	return fmt.Sprintf("%d attempts, %d escaped in %d categories%s; %d categories not judged", attempts, c.Escapes, cats, rep, nj)
}

// MustEscape checks a control's inverse expectation: every listed category
// was judged and every attempt in it that applied escaped. It returns what
// did not, one line each.
func (c Card) MustEscape(ids []string) []string {
	var bad []string
	for _, id := range ids {
		r, ok := c.Row(id)
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: no such category", id))
		case !r.Judged:
			bad = append(bad, fmt.Sprintf("%s: not judged (%s)", id, r.Why))
		case r.Escaped == 0:
			bad = append(bad, fmt.Sprintf("%s: nothing escaped", id))
		}
		for _, res := range c.Results {
			if res.Category == id && res.Outcome == Blocked {
				bad = append(bad, fmt.Sprintf("%s: blocked: %s %s: %s", id, res.Check, res.Target, oneLine(res.Detail)))
			}
		}
	}
	return bad
}

// WriteMarkdown prints cards side by side: one row per category, one
// column per card, each cell "N of M escaped" or "N of M blocked" (with
// ", K reported" for writes the host's audit names at the next start), or
// "not judged", "n/a".
func WriteMarkdown(w io.Writer, cards []Card) {
	fmt.Fprint(w, "| category |")
	for _, c := range cards {
		fmt.Fprintf(w, " %s |", c.Sandbox)
	}
	fmt.Fprint(w, "\n|---|")
	for range cards {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, cat := range Categories {
		fmt.Fprintf(w, "| %s |", cat.Title)
		for _, c := range cards {
			r, _ := c.Row(cat.ID)
			reported := ""
			if r.Reported > 0 {
				reported = fmt.Sprintf(", %d reported", r.Reported)
			}
			switch v := r.Verdict(); v {
			case "ESCAPED":
				fmt.Fprintf(w, " **%d of %d escaped**%s |", r.Escaped, r.Attempts-r.NotApplicable, reported)
			case "blocked", "reported":
				fmt.Fprintf(w, " %d of %d blocked%s |", r.Blocked, r.Attempts-r.NotApplicable, reported)
			default:
				fmt.Fprintf(w, " %s |", v)
			}
		}
		fmt.Fprintln(w)
	}
}

// Config is what the scorecard is pointed at: the world that proves
// network attempts arrived, and what of the host the sandbox shares.
// It is read from a small HuJSON file (LoadConfig) or built from flags.
type Config struct {
	// World is nil when there is none: the network categories are then
	// not judged.
	World *World `json:"world,omitempty"`
	// Workspace and Home are the directories the sandbox shares with the
	// host ("" when it shares none): the persistence attempts write there.
	Workspace string `json:"workspace,omitempty"`
	Home      string `json:"home,omitempty"`
	// Secret is a marker planted by whoever set the sandbox up (in the
	// launcher's environment, another process, a credential file): found
	// anywhere, it is a leak. Empty: secret-named variables are judged
	// instead.
	Secret string `json:"secret,omitempty"`
	// SecretFiles are more files holding credentials to try reading.
	SecretFiles []string `json:"secretFiles,omitempty"`
	// FenceUIDs are the uids of the fence's daemons (default devbox's).
	FenceUIDs []int `json:"fenceUIDs,omitempty"`
	// FencePorts are the loopback ports the fence's daemons listen on
	// (default devbox's DNS filter, gate and gateway).
	FencePorts []int `json:"fencePorts,omitempty"`
	// FenceFiles are the files the fence is built from (default devbox's).
	FenceFiles []string `json:"fenceFiles,omitempty"`
	// Nonce marks this run's queries and datagrams in the world's logs.
	Nonce string `json:"nonce,omitempty"`
	// LeavePlanted makes each write the persistence attempts get through
	// stay: a line naming the nonce appended to the file (created where it
	// was not). A harness then runs the host's audit over the workspace
	// and marks what it names (Card.MarkReported). Only for a throwaway
	// workspace.
	LeavePlanted bool `json:"leavePlanted,omitempty"`
}

// World names servers of internal/testworld (or worldd): TCP servers that
// answer "hello from ADDR", UDP servers that echo, a DNS server that
// answers every name under TunnelDomain.
type World struct {
	// Addrs are ip:port TCP servers no sandbox policy allows (IPv4 and IPv6).
	Addrs []string `json:"addrs,omitempty"`
	// ICMP are world addresses that answer ping.
	ICMP []string `json:"icmp,omitempty"`
	// Names are host:port pairs of world names no policy allows.
	Names []string `json:"names,omitempty"`
	// Resolvers are the world's DNS servers (ip:port).
	Resolvers []string `json:"resolvers,omitempty"`
	// TunnelDomain is a domain the world's DNS answers every name under.
	TunnelDomain string `json:"tunnelDomain,omitempty"`
	// Allowed are host:port pairs of names the sandbox allows, served by
	// the world: the fronting attempts use their addresses. The gate's
	// adversary cases need a site recorder there (worldd -sites); against
	// another server they are not applicable.
	Allowed []string `json:"allowed,omitempty"`
	// UDP are ip:port UDP echo servers.
	UDP []string `json:"udp,omitempty"`
	// Metadata is the cloud metadata address (169.254.169.254:80) where
	// the world stands in for the service; "" leaves the category not
	// judged.
	Metadata string `json:"metadata,omitempty"`
}

// LoadConfig reads a scorecard config file (HuJSON: comments and trailing
// commas allowed; unknown fields are an error).
func LoadConfig(path string) (Config, error) {
	var c Config
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	std, err := hujson.Standardize(raw)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(std)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// notJudged says which categories this config cannot judge, and why.
func (c Config) notJudged() map[string]string {
	nj := map[string]string{}
	w := c.World
	if w == nil {
		for _, cat := range Categories {
			if cat.NeedsWorld {
				nj[cat.ID] = "no world given (--world): only a world's answer proves an attempt arrived"
			}
		}
		w = &World{}
	}
	need := func(id string, ok bool, what string) {
		if _, done := nj[id]; !done && !ok {
			nj[id] = "the world names no " + what
		}
	}
	need("egress-addr", len(w.Addrs)+len(w.ICMP) > 0, "addresses")
	need("egress-name", len(w.Names) > 0, "names")
	need("dns-tunnel", w.TunnelDomain != "", "tunnel domain")
	need("fronting", len(w.Allowed) > 0, "allowed name")
	need("udp", len(w.UDP)+len(w.Allowed) > 0, "UDP servers")
	need("metadata", w.Metadata != "", "metadata stand-in")
	if c.Workspace == "" && c.Home == "" {
		nj["persistence"] = "no workspace or home shared with the host given (--workspace, --home)"
	}
	return nj
}

// Scorecard builds every attempt for c and scores them.
func Scorecard(ctx context.Context, c Config, timeout time.Duration) Card {
	card := Score(ctx, ScorecardAttempts(c), c.notJudged(), timeout)
	card.Nonce = c.Nonce
	card.Date = time.Now().UTC().Format(time.RFC3339)
	return card
}
