package whatsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Template is the WhatsappTemplate object: an approved message template of a business account,
// with the parameters its header and body take.
type Template struct {
	Object          string              `json:"object" jsonschema:"enum=whatsapp_template"`
	Name            string              `json:"name"`
	Language        string              `json:"language" doc:"Meta's language code (en_US, pt_BR, …)."`
	Category        string              `json:"category" doc:"MARKETING, UTILITY or AUTHENTICATION; an open set."`
	Status          string              `json:"status" doc:"Always APPROVED: only approved templates are listed."`
	ParameterFormat string              `json:"parameter_format" doc:"positional: {{1}}, {{2}}, … filled from template.parameters; named: {{first_name}} filled from template.named_parameters." jsonschema:"enum=positional,enum=named"`
	Header          *string             `json:"header" doc:"The header's text; null when it has none or it is a picture or document." jsonschema:"nullable"`
	Body            string              `json:"body" doc:"The body's text, with its placeholders."`
	Footer          *string             `json:"footer" jsonschema:"nullable"`
	Parameters      []TemplateParameter `json:"parameters" doc:"The body's parameters, in order."`
}

// SchemaDoc describes the object in the document.
func (Template) SchemaDoc() string {
	return "A message template approved for the number's business account, which a conversation can be started with."
}

// TemplateParameter is one parameter of a template's body.
type TemplateParameter struct {
	Name    string  `json:"name" doc:"The position (\"1\", \"2\", …) of a positional parameter, or the name of a named one."`
	Example *string `json:"example" doc:"The example given when the template was submitted; null when none." jsonschema:"nullable"`
}

var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// viewTemplate reads a Graph template; false for one that is not approved.
func viewTemplate(g GraphTemplate) (Template, bool) {
	if !strings.EqualFold(g.Status, "APPROVED") {
		return Template{}, false
	}
	t := Template{Object: "whatsapp_template", Name: g.Name, Language: g.Language, Category: g.Category, Status: "APPROVED",
		ParameterFormat: "positional", Parameters: []TemplateParameter{}}
	if strings.EqualFold(g.ParameterFormat, "NAMED") {
		t.ParameterFormat = "named"
	}
	for _, c := range g.Components {
		switch strings.ToUpper(c.Type) {
		case "HEADER":
			if strings.EqualFold(c.Format, "TEXT") || c.Format == "" && c.Text != "" {
				h := c.Text
				t.Header = &h
			}
		case "BODY":
			t.Body = c.Text
			var ex struct {
				Positional [][]string `json:"body_text"`
				Named      []struct {
					Name    string `json:"param_name"`
					Example string `json:"example"`
				} `json:"body_text_named_params"`
			}
			_ = json.Unmarshal(c.Example, &ex)
			seen := map[string]bool{}
			for _, m := range placeholder.FindAllStringSubmatch(c.Text, -1) {
				if seen[m[1]] {
					continue
				}
				seen[m[1]] = true
				p := TemplateParameter{Name: m[1]}
				for _, n := range ex.Named {
					if n.Name == m[1] {
						e := n.Example
						p.Example = &e
					}
				}
				if len(ex.Positional) > 0 {
					var i int
					if _, err := fmt.Sscan(m[1], &i); err == nil && i >= 1 && i <= len(ex.Positional[0]) {
						e := ex.Positional[0][i-1]
						p.Example = &e
					}
				}
				t.Parameters = append(t.Parameters, p)
			}
		case "FOOTER":
			f := c.Text
			t.Footer = &f
		}
	}
	return t, true
}

// forgetTemplates drops a sender's cached list.
func (s *Service) forgetTemplates(id store.WhatsAppSenderID) {
	s.mu.Lock()
	delete(s.templates, string(id))
	s.mu.Unlock()
}

// approved returns the approved templates of a sender's business account: from the cache when
// it is younger than TemplateTTL and refresh is not asked, else from the Graph API.
func (s *Service) approved(ctx context.Context, sn store.WhatsAppSender, refresh bool) ([]Template, error) {
	if sn.BusinessAccountID == "" {
		return nil, fault.E(fault.CodeWhatsAppNotConnected, "The number %s has no business account id: set business_account_id.", sn.PhoneNumberID)
	}
	token, err := s.token(ctx, sn)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	// Cached per sender, not per business account: what one organization's token read is never
	// shown to another that names the same account.
	c, ok := s.templates[string(sn.ID)]
	s.mu.Unlock()
	if ok && !refresh && s.now().Sub(c.at) < s.templateTTL() {
		return c.list, nil
	}
	gs, err := s.Graph.Templates(ctx, token, sn.BusinessAccountID)
	if err != nil {
		return nil, upstream(err)
	}
	out := []Template{}
	for _, g := range gs {
		if t, ok := viewTemplate(g); ok {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b Template) int {
		return strings.Compare(a.Name+"\x00"+a.Language, b.Name+"\x00"+b.Language)
	})
	s.mu.Lock()
	if s.templates == nil {
		s.templates = map[string]cachedTemplates{}
	}
	s.templates[string(sn.ID)] = cachedTemplates{at: s.now(), list: out}
	s.mu.Unlock()
	return out, nil
}

// upstream turns a failure of the Graph API into 502.
func upstream(err error) error {
	if _, ok := err.(*fault.Error); ok {
		return err
	}
	f := fault.E(fault.CodeWhatsAppUpstream, "Meta's Graph API failed: %s.", err)
	f.Cause = err
	return f
}

// ListTemplates returns the approved templates of the actor's sender's business account,
// cached for a few minutes (refresh asks Meta again).
func (s *Service) ListTemplates(ctx context.Context, act app.Actor, senderID string, refresh bool) ([]Template, error) {
	sn, err := s.sender(ctx, act, senderID)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(); err != nil {
		return nil, err
	}
	return s.approved(ctx, sn, refresh)
}

// render fills a template's text with the parameters given, and checks they fit: every
// placeholder of the body filled, no parameter it does not take.
func render(t Template, use TemplateUse) (string, error) {
	var missing, extra []string
	values := map[string]string{}
	if t.ParameterFormat == "named" {
		if len(use.Parameters) > 0 {
			return "", fault.E(fault.CodeWhatsAppTemplateNotFound, "Template %s takes named parameters: send template.named_parameters.", t.Name)
		}
		values = use.NamedParameters
	} else {
		if len(use.NamedParameters) > 0 {
			return "", fault.E(fault.CodeWhatsAppTemplateNotFound, "Template %s takes positional parameters: send template.parameters.", t.Name)
		}
		for i, v := range use.Parameters {
			values[fmt.Sprint(i+1)] = v
		}
	}
	want := map[string]bool{}
	for _, p := range t.Parameters {
		want[p.Name] = true
		if _, ok := values[p.Name]; !ok {
			missing = append(missing, p.Name)
		}
	}
	for k := range values {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		return "", fault.E(fault.CodeWhatsAppTemplateNotFound, "Template %s (%s) takes the parameters [%s]; missing [%s], not taken [%s].",
			t.Name, t.Language, strings.Join(paramNames(t), ", "), strings.Join(missing, ", "), strings.Join(extra, ", "))
	}
	body := placeholder.ReplaceAllStringFunc(t.Body, func(m string) string {
		return values[placeholder.FindStringSubmatch(m)[1]]
	})
	parts := []string{}
	if t.Header != nil && *t.Header != "" {
		parts = append(parts, *t.Header)
	}
	parts = append(parts, body)
	if t.Footer != nil && *t.Footer != "" {
		parts = append(parts, *t.Footer)
	}
	return strings.Join(parts, "\n\n"), nil
}

func paramNames(t Template) []string {
	out := make([]string, len(t.Parameters))
	for i, p := range t.Parameters {
		out[i] = p.Name
	}
	return out
}
