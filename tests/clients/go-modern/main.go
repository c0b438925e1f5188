// A published modern MCP client, the official Go SDK (github.com/modelcontextprotocol/go-sdk,
// pinned in go.mod), drives the reference bridge in front of the reference testee over stdio and
// over Streamable HTTP, speaking MCP 2026-07-28 (the stateless revision).
//
// Per transport, each step printed as it passes:
//
//	connect   the SDK's Connect, which asks server/discover first (its default version is
//	          2026-07-28) and falls back to initialize otherwise; the negotiated version it
//	          reports must be 2026-07-28 and the server must name itself in the result _meta
//	listen    Connect opens subscriptions/listen for tool list changes (a ToolListChangedHandler
//	          is set); the bridge's notifications/subscriptions/acknowledged must arrive, tagged
//	          with a subscriptionId
//	list      tools/list: echo and toggle listed, the hidden tool secret not
//	call      tools/call echo
//	change    tools/call toggle {enable: true} makes the testee enable secret; the bridge must
//	          send notifications/tools/list_changed on the listen stream, tagged with the same
//	          subscriptionId, and tools/list must then list secret
//	mrtr      (only with --mrtr) tools/call ask: the testee sends a SamplingRequest, which a
//	          bridge serving 2026-07-28 turns into an InputRequiredResult (MRTR); the SDK's
//	          client middleware answers it with the CreateMessageHandler and retries; the call
//	          must return that handler's answer, and no sampling/createMessage request may reach
//	          the client. Off by default until the reference bridge implements MRTR (issue 30).
//
// Usage: go run . --bin path/to/protomcp-conform [--transport stdio|http|both] [--mrtr]
// Exit status 0 when every step passes; 1 with the failing step otherwise. Every wait is bounded
// and every bridge runs in a process group of its own that is killed at the end.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	wantVersion = "2026-07-28"
	// The answer the client's model gives in the mrtr step.
	modelAnswer = "42, says the Go client's model"
	stepTimeout = 10 * time.Second
)

func main() {
	bin := flag.String("bin", "", "path to protomcp-conform (required)")
	transport := flag.String("transport", "both", "stdio, http or both")
	mrtr := flag.Bool("mrtr", false, "also get a sampling answer through MRTR (needs MRTR in the bridge)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "go-modern: --bin path/to/protomcp-conform is required")
		os.Exit(2)
	}
	var transports []string
	switch *transport {
	case "both":
		transports = []string{"stdio", "http"}
	case "stdio", "http":
		transports = []string{*transport}
	default:
		fmt.Fprintf(os.Stderr, "go-modern: --transport must be stdio, http or both, not %q\n", *transport)
		os.Exit(2)
	}
	failed := false
	for _, t := range transports {
		if err := run(*bin, t, *mrtr); err != nil {
			fmt.Printf("go-modern %s: FAIL: %v\n", t, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// observed is what the client's receiving middleware saw: the listen acknowledgement, the tagged
// tool list changes and any server-to-client request.
type observed struct {
	mu        sync.Mutex
	ack       chan string // subscriptionIds of acknowledgements
	changed   chan string // subscriptionIds of notifications/tools/list_changed
	requests  []string    // methods of requests from the server
	samplings int         // calls of the CreateMessageHandler
}

func subscriptionID(p mcp.Params) string {
	if p == nil {
		return ""
	}
	v, ok := p.GetMeta()[mcp.MetaKeySubscriptionID]
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

func (o *observed) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch {
		case method == "notifications/subscriptions/acknowledged":
			o.ack <- subscriptionID(req.GetParams())
		case method == "notifications/tools/list_changed":
			o.changed <- subscriptionID(req.GetParams())
		case !strings.HasPrefix(method, "notifications/"):
			o.mu.Lock()
			o.requests = append(o.requests, method)
			o.mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

func wait(ch chan string, what string) (string, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-time.After(stepTimeout):
		return "", fmt.Errorf("no %s within %s", what, stepTimeout)
	}
}

func run(bin, transport string, mrtr bool) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	step := func(name, format string, args ...any) {
		fmt.Printf("go-modern %s: %-7s ok: %s\n", transport, name, fmt.Sprintf(format, args...))
	}

	o := &observed{ack: make(chan string, 8), changed: make(chan string, 8)}
	opts := &mcp.ClientOptions{
		// Its presence makes Connect open subscriptions/listen with toolsListChanged.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	}
	if mrtr {
		// Declares `sampling` in every request's clientCapabilities.
		opts.CreateMessageHandler = func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			o.mu.Lock()
			o.samplings++
			o.mu.Unlock()
			return &mcp.CreateMessageResult{
				Content:    &mcp.TextContent{Text: modelAnswer},
				Model:      "go-modern",
				Role:       "assistant",
				StopReason: "endTurn",
			}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "protomcp-conform-go-modern", Version: "1.0.0"}, opts)
	client.AddReceivingMiddleware(o.middleware)

	// The bridge, in a process group of its own (it starts the testee), killed whatever happens.
	var t mcp.Transport
	var bridge *exec.Cmd
	switch transport {
	case "stdio":
		bridge = exec.Command(bin, "bridge", "--call-timeout", "5s", "--", bin, "testee")
		bridge.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		bridge.Stderr = os.Stderr
		t = &mcp.CommandTransport{Command: bridge, TerminateDuration: 2 * time.Second}
	case "http":
		bridge = exec.Command(bin, "bridge", "--transport", "http", "--host", "127.0.0.1", "--port", "0",
			"--call-timeout", "5s", "--", bin, "testee")
		bridge.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		url, err := startHTTP(bridge)
		if err != nil {
			killGroup(bridge)
			return err
		}
		t = &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	}
	defer killGroup(bridge)

	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	init := cs.InitializeResult()
	if init.ProtocolVersion != wantVersion {
		return fmt.Errorf("connect: negotiated %q, want %q", init.ProtocolVersion, wantVersion)
	}
	if init.ServerInfo == nil || init.ServerInfo.Name == "" {
		return errors.New("connect: server/discover named no server (_meta serverInfo)")
	}
	step("connect", "protocol version %s (server/discover), server %s %s", init.ProtocolVersion,
		init.ServerInfo.Name, init.ServerInfo.Version)

	sub, err := wait(o.ack, "notifications/subscriptions/acknowledged")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if sub == "" {
		return errors.New("listen: the acknowledgement carries no subscriptionId")
	}
	step("listen", "acknowledged, subscriptionId %s", sub)

	names, err := toolNames(ctx, cs)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, n := range []string{"echo", "toggle", "ask"} {
		if !slices.Contains(names, n) {
			return fmt.Errorf("list: %s missing from %v", n, names)
		}
	}
	if slices.Contains(names, "secret") {
		return fmt.Errorf("list: the hidden tool secret is listed: %v", names)
	}
	step("list", "%d tools: %s", len(names), strings.Join(names, ", "))

	text, err := callText(ctx, cs, "echo", map[string]any{"text": "hello from go"})
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	if text != "hello from go" {
		return fmt.Errorf("call: echo returned %q", text)
	}
	step("call", "echo returned %q", text)

	if _, err := callText(ctx, cs, "toggle", map[string]any{"enable": true}); err != nil {
		return fmt.Errorf("change: %w", err)
	}
	changed, err := wait(o.changed, "notifications/tools/list_changed on the listen stream")
	if err != nil {
		return fmt.Errorf("change: %w", err)
	}
	if changed != sub {
		return fmt.Errorf("change: list_changed tagged with subscriptionId %q, the listen is %q", changed, sub)
	}
	if names, err = toolNames(ctx, cs); err != nil {
		return fmt.Errorf("change: %w", err)
	}
	if !slices.Contains(names, "secret") {
		return fmt.Errorf("change: secret not listed after the change: %v", names)
	}
	step("change", "notifications/tools/list_changed (subscriptionId %s); secret now listed", changed)

	if mrtr {
		text, err := callText(ctx, cs, "ask", map[string]any{"question": "What is 6 x 7?"})
		if err != nil {
			return fmt.Errorf("mrtr: %w", err)
		}
		o.mu.Lock()
		samplings, requests := o.samplings, slices.Clone(o.requests)
		o.mu.Unlock()
		if len(requests) > 0 {
			return fmt.Errorf("mrtr: the bridge sent requests to the client (%v); 2026-07-28 asks through InputRequiredResult", requests)
		}
		if text != modelAnswer || samplings != 1 {
			return fmt.Errorf("mrtr: ask returned %q after %d sampling answer(s); want %q after 1", text, samplings, modelAnswer)
		}
		step("mrtr", "ask answered %q through InputRequiredResult and a retry", text)
	}
	return nil
}

// startHTTP starts the bridge and returns the URL it prints once its tool process is ready.
func startHTTP(bridge *exec.Cmd) (string, error) {
	stderr, err := bridge.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := bridge.Start(); err != nil {
		return "", fmt.Errorf("starting the bridge: %w", err)
	}
	found := make(chan string, 1)
	go func() {
		const prefix = "protomcp-conform bridge: listening on "
		s := bufio.NewScanner(stderr)
		sent := false
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(os.Stderr, line)
			if url, ok := strings.CutPrefix(line, prefix); ok && !sent {
				found <- strings.TrimSpace(url)
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		if !sent {
			close(found)
		}
	}()
	select {
	case url, ok := <-found:
		if !ok {
			return "", errors.New("the bridge exited before listening")
		}
		return url, nil
	case <-time.After(30 * time.Second):
		return "", errors.New("the bridge did not print its address within 30 s")
	}
}

// killGroup ends the bridge's process group (the bridge and its testee) and reaps the bridge.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func toolNames(ctx context.Context, cs *mcp.ClientSession) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names, nil
}

func callText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("tools/call %s: %w", name, err)
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("tools/call %s: want one text block, not an error: %+v", name, res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("tools/call %s: want a text block, got %T", name, res.Content[0])
	}
	return tc.Text, nil
}
