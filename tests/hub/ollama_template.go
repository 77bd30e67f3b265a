// Renders an Ollama Modelfile TEMPLATE on conversations the way the Ollama server does, with Go's own text/template:
// tests/hub/test_ollama_modelfile.py compares the result with the Hugging Face chat template (Jinja) it replaces.
//
//	go run tests/hub/ollama_template.go < input.json    # {"template", "system", "conversations": [[{role, content}]]}
//
// The steps are ported from github.com/ollama/ollama at commit fb30760996871fa9460115c753afd2c60d4ab0f7:
// server/routes.go (ChatHandler) puts the Modelfile's SYSTEM first when a conversation has no system message;
// template/template.go parses with Option("missingkey=zero") and its function map, takes the Messages path only when
// the template names .Messages (otherwise its legacy .Prompt/.Response path, which this program refuses), merges
// consecutive messages of one role with "\n\n" (collate) and executes with System, Messages, Tools and Response.
// Writes a JSON list with one rendering per conversation, or exits 1 with the reason.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type input struct {
	Template      string      `json:"template"`
	System        string      `json:"system"`
	Conversations [][]message `json:"conversations"`
}

var funcs = template.FuncMap{
	"json": func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	},
	"currentDate":      func(args ...string) string { return time.Now().Format("2006-01-02") },
	"yesterdayDate":    func(args ...string) string { return time.Now().AddDate(0, 0, -1).Format("2006-01-02") },
	"toTypeScriptType": func(v any) string { return "any" },
}

// namesMessages reports whether a template node refers to .Messages (template.Vars in Ollama).
func namesMessages(n parse.Node) bool {
	switch t := n.(type) {
	case *parse.ListNode:
		if t == nil {
			return false
		}
		for _, c := range t.Nodes {
			if namesMessages(c) {
				return true
			}
		}
	case *parse.ActionNode:
		return namesMessages(t.Pipe)
	case *parse.PipeNode:
		if t == nil {
			return false
		}
		for _, c := range t.Cmds {
			if namesMessages(c) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range t.Args {
			if namesMessages(a) {
				return true
			}
		}
	case *parse.FieldNode:
		for _, id := range t.Ident {
			if strings.EqualFold(id, "messages") {
				return true
			}
		}
	case *parse.IfNode:
		return namesMessages(t.Pipe) || namesMessages(t.List) || namesMessages(t.ElseList)
	case *parse.RangeNode:
		return namesMessages(t.Pipe) || namesMessages(t.List) || namesMessages(t.ElseList)
	case *parse.WithNode:
		return namesMessages(t.Pipe) || namesMessages(t.List) || namesMessages(t.ElseList)
	}
	return false
}

func collate(msgs []message) (string, []*message) {
	var system []string
	var collated []*message
	for i := range msgs {
		if msgs[i].Role == "system" {
			system = append(system, msgs[i].Content)
		}
		if len(collated) > 0 && collated[len(collated)-1].Role == msgs[i].Role && msgs[i].Role != "tool" {
			collated[len(collated)-1].Content += "\n\n" + msgs[i].Content
		} else {
			collated = append(collated, &msgs[i])
		}
	}
	return strings.Join(system, "\n\n"), collated
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail("input: %v", err)
	}
	tmpl, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(in.Template)
	if err != nil {
		fail("template: %v", err)
	}
	if !namesMessages(tmpl.Tree.Root) {
		fail("template: no .Messages, so Ollama would render it through its legacy .Prompt/.Response path")
	}
	var out []string
	for _, msgs := range in.Conversations {
		if len(msgs) > 0 && msgs[0].Role != "system" && in.System != "" {
			msgs = append([]message{{Role: "system", Content: in.System}}, msgs...)
		}
		system, collated := collate(msgs)
		var b strings.Builder
		if err := tmpl.Execute(&b, map[string]any{
			"System": system, "Messages": collated, "Tools": nil, "Response": "", "Think": false,
			"ThinkLevel": "", "IsThinkSet": false,
		}); err != nil {
			fail("execute: %v", err)
		}
		out = append(out, b.String())
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("output: %v", err)
	}
}
