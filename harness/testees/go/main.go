// The protomcp-conform testee for the Go SDK (github.com/msilverblatt/protomcp/sdk/go).
//
// It registers the fixture of harness/testees/README.md (spec Appendix B) through the SDK's
// public API only, the way its documentation shows: handlers read their arguments with plain
// type assertions (the schema declared with Args is the SDK's to enforce) and report failures by
// panicking or by returning an ErrorResult. Items the v0.3.0 API cannot express (structured
// content, tool-list requests with replies, sampling, roots, streams) are left out; the manifest
// lists them as unsupported.
//
// Started with --middleware it also registers the protocol middleware guard, mirror and broken.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/msilverblatt/protomcp/sdk/go/protomcp"
)

// maxBig is the largest n that big and big_err accept: a result_json of at most 64 MiB.
const maxBig = 67108837

func main() {
	registerTools()
	registerResources()
	registerPrompts()
	for _, a := range os.Args[1:] {
		if a == "--middleware" {
			registerMiddleware()
		}
	}
	protomcp.Run()
}

// count reads a non-negative size argument; the harness may ask for more than a testee should allocate.
func count(args map[string]interface{}) (int, *protomcp.ToolResult) {
	n := int(args["n"].(float64))
	if n < 0 || n > maxBig {
		r := protomcp.ErrorResult(fmt.Sprintf("n must be between 0 and %d", maxBig), "E_RANGE", "", false)
		return 0, &r
	}
	return n, nil
}

func registerTools() {
	protomcp.Tool("echo",
		protomcp.Description("Returns its text argument"),
		protomcp.Args(protomcp.StrArg("text")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			return protomcp.Result(args["text"].(string))
		}),
	)

	protomcp.Tool("add",
		protomcp.Description("Adds two integers"),
		protomcp.Args(protomcp.IntArg("a"), protomcp.IntArg("b")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			a := int64(args["a"].(float64))
			b := int64(args["b"].(float64))
			return protomcp.Result(fmt.Sprintf("%d", a+b))
		}),
	)

	protomcp.Tool("fail",
		protomcp.Description("Always fails: the handler panics"),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			panic("fixture failure")
		}),
	)

	protomcp.Tool("fail_soft",
		protomcp.Description("Returns a structured, retryable error"),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			return protomcp.ErrorResult("soft failure", "E_FIXTURE", "retry later", true)
		}),
	)

	protomcp.Tool("slow",
		protomcp.Description("Takes 100 ms per step, reporting progress; stops when cancelled"),
		protomcp.Args(protomcp.IntArg("steps")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			steps := int64(args["steps"].(float64))
			for i := int64(1); i <= steps; i++ {
				time.Sleep(100 * time.Millisecond)
				if ctx.IsCancelled() {
					return protomcp.Result("cancelled")
				}
				ctx.ReportProgress(i, steps, fmt.Sprintf("step %d", i))
			}
			return protomcp.Result(fmt.Sprintf("done %d", steps))
		}),
	)

	protomcp.Tool("big",
		protomcp.Description("Returns n times the letter x"),
		protomcp.Args(protomcp.IntArg("n")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			n, bad := count(args)
			if bad != nil {
				return *bad
			}
			return protomcp.Result(strings.Repeat("x", n))
		}),
	)

	protomcp.Tool("big_err",
		protomcp.Description("Returns an error whose text is n times the letter x"),
		protomcp.Args(protomcp.IntArg("n")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			n, bad := count(args)
			if bad != nil {
				return *bad
			}
			return protomcp.ToolResult{
				ResultText: strings.Repeat("x", n),
				IsError:    true,
				ErrorCode:  "E_BIG",
				Message:    "big error",
			}
		}),
	)

	protomcp.Tool("toggle",
		protomcp.Description("Enables or disables the secret tool"),
		protomcp.Args(protomcp.BoolArg("enable")),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			r := protomcp.Result("ok")
			if args["enable"].(bool) {
				r.EnableTools = []string{"secret"}
			} else {
				r.DisableTools = []string{"secret"}
			}
			return r
		}),
	)

	protomcp.Tool("secret",
		protomcp.Description("A tool registered hidden"),
		protomcp.HiddenHint(true),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			return protomcp.Result("secret")
		}),
	)

	protomcp.Tool("logit",
		protomcp.Description("Logs one message at level info"),
		protomcp.Handler(func(ctx protomcp.ToolContext, args map[string]interface{}) protomcp.ToolResult {
			protomcp.Log.Info("fixture log")
			return protomcp.Result("logged")
		}),
	)
}

func registerResources() {
	protomcp.RegisterResource(protomcp.ResourceDef{
		URI:         "fixture://static",
		Name:        "static",
		Description: "A static text resource",
		MimeType:    "text/plain",
		Size:        14,
		HandlerFn: func() []protomcp.ResourceContent {
			return []protomcp.ResourceContent{{URI: "fixture://static", MimeType: "text/plain", Text: "static-content"}}
		},
	})
	protomcp.RegisterResource(protomcp.ResourceDef{
		URI:         "fixture://blob",
		Name:        "blob",
		Description: "Four bytes of binary content",
		MimeType:    "application/octet-stream",
		Size:        4,
		HandlerFn: func() []protomcp.ResourceContent {
			return []protomcp.ResourceContent{{URI: "fixture://blob", MimeType: "application/octet-stream", Blob: []byte{0x00, 0xff, 0x10, 0x80}}}
		},
	})
	protomcp.RegisterResource(protomcp.ResourceDef{
		URI:         "fixture://item/0",
		Name:        "item-zero",
		Description: "A static resource the item template also matches",
		MimeType:    "text/plain",
		HandlerFn: func() []protomcp.ResourceContent {
			return []protomcp.ResourceContent{{URI: "fixture://item/0", MimeType: "text/plain", Text: "static item zero"}}
		},
	})
	protomcp.RegisterResource(protomcp.ResourceDef{
		URI:         "fixture://fail",
		Name:        "fail",
		Description: "A resource whose handler always fails",
		MimeType:    "text/plain",
		HandlerFn: func() []protomcp.ResourceContent {
			panic("fixture failure")
		},
	})
	protomcp.RegisterResourceTemplate(protomcp.ResourceTemplateDef{
		URITemplate: "fixture://item/{id}",
		Name:        "item",
		Description: "One item by id",
		MimeType:    "text/plain",
		HandlerFn: func(uri string) []protomcp.ResourceContent {
			id := strings.TrimPrefix(uri, "fixture://item/")
			return []protomcp.ResourceContent{{URI: uri, MimeType: "text/plain", Text: "item " + id}}
		},
	})
}

func registerPrompts() {
	protomcp.RegisterPrompt(protomcp.PromptDef{
		Name:        "greet",
		Description: "Greets someone by name",
		Arguments:   []protomcp.PromptArg{{Name: "name", Description: "Who to greet", Required: true}},
		HandlerFn: func(args map[string]string) (string, []protomcp.PromptMessage) {
			return "A greeting", []protomcp.PromptMessage{protomcp.UserMessage("Hello, " + args["name"] + "!")}
		},
	})
	protomcp.RegisterPrompt(protomcp.PromptDef{
		Name:        "fail",
		Description: "A prompt whose handler always fails",
		Arguments:   []protomcp.PromptArg{{Name: "x", Description: "ignored"}},
		HandlerFn: func(args map[string]string) (string, []protomcp.PromptMessage) {
			panic("fixture failure")
		},
	})
	protomcp.RegisterCompletion("ref/prompt", "greet", "name", prefixes("alice", "bob", "bobby"))
	protomcp.RegisterCompletion("ref/resource", "fixture://item/{id}", "id", prefixes("1", "2", "10"))
	protomcp.RegisterCompletion("ref/prompt", "fail", "x", func(value string) protomcp.CompletionResult {
		panic("fixture failure")
	})
}

// prefixes completes an argument with those of candidates that start with its value.
func prefixes(candidates ...string) protomcp.CompletionHandler {
	return func(value string) protomcp.CompletionResult {
		var values []string
		for _, c := range candidates {
			if strings.HasPrefix(c, value) {
				values = append(values, c)
			}
		}
		return protomcp.CompletionResult{Values: values, Total: int32(len(values))}
	}
}

func registerMiddleware() {
	protomcp.Middleware("guard", 1, func(phase, toolName, argsJSON, resultJSON string, isError bool) map[string]interface{} {
		if phase == "before" && toolName == "secret" {
			return map[string]interface{}{"reject": true, "reject_reason": "blocked by guard"}
		}
		return nil
	})

	protomcp.Middleware("mirror", 10, func(phase, toolName, argsJSON, resultJSON string, isError bool) map[string]interface{} {
		switch phase {
		case "before":
			// Keep the members as they were sent (RawMessage), add one.
			args := map[string]json.RawMessage{}
			if argsJSON != "" {
				if err := json.Unmarshal([]byte(argsJSON), &args); err != nil || args == nil {
					panic(fmt.Sprintf("arguments are not a JSON object: %s", argsJSON))
				}
			}
			mark, _ := json.Marshal("before:" + toolName)
			args["mw"] = mark
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(args); err != nil {
				panic(err)
			}
			return map[string]interface{}{"arguments_json": strings.TrimSuffix(out.String(), "\n")}
		case "after":
			out, _ := json.Marshal([]map[string]string{{"type": "text", "text": fmt.Sprintf("after:%s:%t", toolName, isError)}})
			return map[string]interface{}{"result_json": string(out)}
		}
		return nil
	})

	protomcp.Middleware("broken", 20, func(phase, toolName, argsJSON, resultJSON string, isError bool) map[string]interface{} {
		if toolName == "boom" {
			panic("broken middleware: boom")
		}
		return nil
	})
}
