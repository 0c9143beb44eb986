package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
)

// issue 15: contacts, the do-not-call list and campaigns.

const campaignsTagDoc = "Campaigns call a list of people with an outbound agent, at a set pace (pacing: calls at once and starts per minute, within the organization's call limit) and within calling hours read on each person's own wall clock. " +
	"Statuses: draft → scheduled (start_at) → running ⇄ paused → completed or cancelled. Each person moves queued → dialing → in_call → completed, or no_answer, busy, voicemail, failed, skipped_dnc (put on the do-not-call list meanwhile), cancelled; no_answer is retried after a growing delay (callbacks), busy and voicemail only when configured. " +
	"A campaign whose recent calls mostly fail for one cause pauses itself with paused_reason. Each attempt is dialled at most once, whatever crashes. A test key may not create or cancel campaigns (403) and lists none."

// importMaxBody bounds an import's body: 10,000 rows of a few hundred bytes.
const importMaxBody = 8 << 20

// campaignOperations are the operations of campaigns, contacts and the do-not-call list.
func campaignOperations() []*operation {
	startCodes := []string{fault.CodeAgentNotFound, fault.CodeAgentNotPublished, fault.CodeAgentNotOutbound, fault.CodeChannelDisabled,
		fault.CodeProjectFrozen, fault.CodeNoNumberToCallFrom, fault.CodePhoneNumberNotFound, fault.CodeDoNotCall, fault.CodePhoneUnavailable, fault.CodeCreditExhausted}
	moveCodes := []string{fault.CodeCampaignNotFound, fault.CodeCampaignState, fault.CodeProjectFrozen}
	return []*operation{
		typed(operation{
			ID: "listCampaigns", Method: http.MethodGet, Path: "/campaigns", Tag: "Campaigns",
			Summary:    "List campaigns, newest first, with how many contacts are in each state",
			Permission: "campaigns:read",
			Status:     http.StatusOK,
		}, (*API).listCampaigns),
		typed(operation{
			ID: "createCampaign", Method: http.MethodPost, Path: "/campaigns", Tag: "Campaigns",
			Summary: "Create a campaign: a list of people for an outbound agent to call",
			Description: "A draft until it starts: start: true starts dialling at once, start_at at that moment, and otherwise POST …/start. " +
				"Each contact is checked (422 names it by its place in contacts); a number on the do-not-call list is 409. Needs a live key.",
			Permission: "campaigns:write", LiveOnly: true, Changes: true, Idempotency: idemRequired, MaxBody: 1 << 20,
			Codes:    startCodes,
			Status:   http.StatusCreated,
			Location: true, Locate: func(v any) string { return "/v1/campaigns/" + v.(campaigns.Campaign).ID },
		}, (*API).createCampaign),
		typed(operation{
			ID: "getCampaign", Method: http.MethodGet, Path: "/campaigns/{campaign_id}", Tag: "Campaigns",
			Summary:    "Get a campaign with how many contacts are in each state",
			Permission: "campaigns:read",
			Codes:      []string{fault.CodeCampaignNotFound},
			Status:     http.StatusOK,
		}, (*API).getCampaign),
		typed(operation{
			ID: "cancelCampaign", Method: http.MethodPost, Path: "/campaigns/{campaign_id}/cancel", Tag: "Campaigns",
			Summary:     "Cancel a campaign for good",
			Description: "Nobody else on the list is called (waiting contacts become cancelled); calls in progress carry on. 409 when it is completed or cancelled already. Needs a live key.",
			Permission:  "campaigns:write", LiveOnly: true, Changes: true,
			Codes:  moveCodes,
			Status: http.StatusOK,
		}, (*API).cancelCampaign),
		typed(operation{
			ID: "listCampaignContacts", Method: http.MethodGet, Path: "/campaigns/{campaign_id}/contacts", Tag: "Campaigns",
			Summary:    "List a campaign's contacts with their state, attempts and conversations",
			Permission: "campaigns:read",
			Codes:      []string{fault.CodeCampaignNotFound},
			Status:     http.StatusOK,
		}, (*API).listCampaignContacts),
		typed(operation{
			ID: "addCampaignContacts", Method: http.MethodPost, Path: "/campaigns/{campaign_id}/contacts", Tag: "Campaigns",
			Summary:     "Add up to 1,000 people to a campaign",
			Description: "A number the campaign has already is skipped. 409 when the campaign is completed or cancelled, or a number is on the do-not-call list.",
			Permission:  "campaigns:write", Changes: true, MaxBody: 1 << 20,
			Codes:  []string{fault.CodeCampaignNotFound, fault.CodeCampaignState, fault.CodeProjectFrozen, fault.CodeDoNotCall},
			Status: http.StatusOK,
		}, (*API).addCampaignContacts),
		typed(operation{
			ID: "pauseCampaign", Method: http.MethodPost, Path: "/campaigns/{campaign_id}/pause", Tag: "Campaigns",
			Summary:     "Pause a running or scheduled campaign",
			Description: "Nothing new is dialled while it is paused; calls in progress carry on. 409 from any other status.",
			Permission:  "campaigns:write", Changes: true,
			Codes:  moveCodes,
			Status: http.StatusOK,
		}, (*API).pauseCampaign),
		typed(operation{
			ID: "resumeCampaign", Method: http.MethodPost, Path: "/campaigns/{campaign_id}/resume", Tag: "Campaigns",
			Summary:     "Resume a paused campaign",
			Description: "Also after the circuit breaker paused it (paused_reason says why). 409 from any other status.",
			Permission:  "campaigns:write", Changes: true,
			Codes:  moveCodes,
			Status: http.StatusOK,
		}, (*API).resumeCampaign),
		typed(operation{
			ID: "startCampaign", Method: http.MethodPost, Path: "/campaigns/{campaign_id}/start", Tag: "Campaigns",
			Summary:     "Start a draft or scheduled campaign now",
			Description: "409 from any other status: a cancelled or completed campaign never starts again.",
			Permission:  "campaigns:write", Changes: true,
			Codes:  append(append([]string{}, moveCodes...), fault.CodePhoneUnavailable),
			Status: http.StatusOK,
		}, (*API).startCampaign),
		typed(operation{
			ID: "listContacts", Method: http.MethodGet, Path: "/contacts", Tag: "Contacts",
			Summary:    "List contacts, newest first",
			Permission: "contacts:read",
			Status:     http.StatusOK,
		}, (*API).listContacts),
		typed(operation{
			ID: "createContact", Method: http.MethodPost, Path: "/contacts", Tag: "Contacts",
			Summary:     "Create a contact",
			Description: "The number is checked as a phone number and kept in E.164; the time zone against the IANA database. 409 when the project has the number or external_id, or the number is on the do-not-call list.",
			Permission:  "contacts:write", Changes: true,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeContactExists, fault.CodeDoNotCall},
			Status: http.StatusCreated, Location: true,
			Locate: func(v any) string { return "/v1/contacts/" + v.(campaigns.Contact).ID },
		}, (*API).createContact),
		typedRaw[importContactsIn, campaigns.ImportResult](operation{
			ID: "importContacts", Method: http.MethodPost, Path: "/contacts/import", Tag: "Contacts",
			Summary: "Import up to 10,000 contacts from CSV or JSON lines",
			Description: "The body is the file (Content-Type text/csv, or application/x-ndjson for JSON lines), or multipart/form-data with a part named file. " +
				"CSV: a header row naming number, name, timezone, external_id, and var.<name> / meta.<name> columns; a byte-order mark, CRLF lines and quoted commas are read. " +
				"Each row is created, or updates the contact with its external_id, or else its number; importing again makes no duplicates. A row that does not fit is refused and named in errors (row and field) without stopping the others; rows past 10,000 are refused. " +
				"Each refused row's errors entry carries the code its field would get in a createContact problem (an unknown time zone is invalid_value at timezone, as createContact answers 422 for it) and type, the problem type the row alone would get (validation_failed, or number_on_do_not_call_list). " +
				"When rows are kept the answer is 200 with the counts and errors; when every row is refused (for example every time zone is unknown) nothing is imported and the answer is 422 validation_failed, errors[] naming each row and field as the pointer /rows/<row>/<field>, with members rows and refused: a bad row is never dropped silently. " +
				"A binary file is 422 unreadable_import.",
			Permission: "contacts:write", Changes: true, Multipart: true, MaxBody: importMaxBody,
			RawMedia: []string{"text/csv", "application/x-ndjson"},
			Codes:    []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeUnreadableImport},
			Status:   http.StatusOK,
		}, (*API).importContacts),
		typed(operation{
			ID: "getContact", Method: http.MethodGet, Path: "/contacts/{contact_id}", Tag: "Contacts",
			Summary:    "Get a contact",
			Permission: "contacts:read",
			Codes:      []string{fault.CodeContactNotFound},
			Status:     http.StatusOK,
		}, (*API).getContact),
		typed(operation{
			ID: "updateContact", Method: http.MethodPatch, Path: "/contacts/{contact_id}", Tag: "Contacts",
			Summary:    "Change a contact",
			Permission: "contacts:write", Changes: true,
			Codes:  []string{fault.CodeContactNotFound, fault.CodeProjectFrozen, fault.CodeContactExists},
			Status: http.StatusOK,
		}, (*API).updateContact),
		typed(operation{
			ID: "deleteContact", Method: http.MethodDelete, Path: "/contacts/{contact_id}", Tag: "Contacts",
			Summary:     "Delete a contact",
			Description: "Campaigns that called it keep their copy of the person and its attempts.",
			Permission:  "contacts:write", Changes: true,
			Codes:  []string{fault.CodeContactNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteContact),
		typed(operation{
			ID: "listDoNotCall", Method: http.MethodGet, Path: "/do-not-call", Tag: "Do-not-call",
			Summary:     "List the organization's do-not-call list, by number",
			Description: "The list is the whole organization's: it needs a key that reaches every project.",
			Permission:  "dnc:read",
			Codes:       []string{fault.CodeAllProjectsRequired},
			Status:      http.StatusOK,
		}, (*API).listDoNotCall),
		typed(operation{
			ID: "addDoNotCall", Method: http.MethodPost, Path: "/do-not-call", Tag: "Do-not-call",
			Summary:     "Put a number on the do-not-call list",
			Description: "No call, scheduled call or campaign of the organization calls it from then on; a campaign's contact with the number ends skipped_dnc when its turn comes. A number on the list already is kept as it was.",
			Permission:  "dnc:write", Changes: true,
			Status: http.StatusCreated,
		}, (*API).addDoNotCall),
		typed(operation{
			ID: "removeDoNotCall", Method: http.MethodDelete, Path: "/do-not-call/{number}", Tag: "Do-not-call",
			Summary:     "Take a number off the do-not-call list",
			Description: "Needs a key that reaches every project (404 otherwise, as for a number not on the list).",
			Permission:  "dnc:write", Changes: true,
			Codes:  []string{fault.CodeDoNotCallNotFound},
			Status: http.StatusOK,
		}, (*API).removeDoNotCall),
	}
}

type listCampaignsIn struct {
	listQuery
	AgentID string `query:"agent_id" format:"uuid" doc:"Only this agent's campaigns."`
	Status  string `query:"status" enum:"draft,scheduled,running,paused,completed,cancelled"`
}

func (a *API) listCampaigns(ctx context.Context, c *call, in *listCampaignsIn) (*list[campaigns.Campaign], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	cs, err := a.Campaigns.List(ctx, c.actor(ctx), campaigns.CampaignFilter{AgentID: in.AgentID, Status: in.Status}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(x campaigns.Campaign) string { return x.ID }), nil
}

type createCampaignIn struct {
	Body campaigns.CampaignCreate `body:"required"`
}

func (a *API) createCampaign(ctx context.Context, c *call, in *createCampaignIn) (*campaigns.Campaign, error) {
	x, err := a.Campaigns.Create(ctx, c.actor(ctx), in.Body)
	return &x, err
}

type campaignIn struct {
	ID string `path:"campaign_id" format:"uuid" doc:"The campaign."`
}

func (a *API) getCampaign(ctx context.Context, c *call, in *campaignIn) (*campaigns.Campaign, error) {
	x, err := a.Campaigns.Get(ctx, c.actor(ctx), in.ID)
	return &x, err
}

func (a *API) moveCampaign(ctx context.Context, c *call, id, op string) (*campaigns.Campaign, error) {
	x, err := a.Campaigns.Move(ctx, c.actor(ctx), id, op)
	return &x, err
}

func (a *API) cancelCampaign(ctx context.Context, c *call, in *campaignIn) (*campaigns.Campaign, error) {
	return a.moveCampaign(ctx, c, in.ID, "cancel")
}

func (a *API) pauseCampaign(ctx context.Context, c *call, in *campaignIn) (*campaigns.Campaign, error) {
	return a.moveCampaign(ctx, c, in.ID, "pause")
}

func (a *API) resumeCampaign(ctx context.Context, c *call, in *campaignIn) (*campaigns.Campaign, error) {
	return a.moveCampaign(ctx, c, in.ID, "resume")
}

func (a *API) startCampaign(ctx context.Context, c *call, in *campaignIn) (*campaigns.Campaign, error) {
	return a.moveCampaign(ctx, c, in.ID, "start")
}

type listCampaignContactsIn struct {
	listQuery
	ID    string `path:"campaign_id" format:"uuid" doc:"The campaign."`
	State string `query:"state" enum:"queued,dialing,in_call,completed,no_answer,busy,voicemail,failed,skipped_dnc,cancelled"`
}

func (a *API) listCampaignContacts(ctx context.Context, c *call, in *listCampaignContactsIn) (*list[campaigns.CampaignContact], error) {
	pg, err := c.page(in.ID)
	if err != nil {
		return nil, err
	}
	cs, err := a.Campaigns.ListCampaignContacts(ctx, c.actor(ctx), in.ID, in.State, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(x campaigns.CampaignContact) string { return x.ID }), nil
}

type addCampaignContactsIn struct {
	ID   string                        `path:"campaign_id" format:"uuid" doc:"The campaign."`
	Body campaigns.CampaignContactsAdd `body:"required"`
}

func (a *API) addCampaignContacts(ctx context.Context, c *call, in *addCampaignContactsIn) (*campaigns.CampaignContactsAdded, error) {
	x, err := a.Campaigns.AddCampaignContacts(ctx, c.actor(ctx), in.ID, in.Body)
	return &x, err
}

type listContactsIn struct {
	listQuery
	ProjectID  string `query:"project_id" format:"uuid" doc:"Only this project's contacts."`
	Number     string `query:"number" doc:"Only the contact with this number (E.164)."`
	ExternalID string `query:"external_id" doc:"Only the contact with this external id."`
}

func (a *API) listContacts(ctx context.Context, c *call, in *listContactsIn) (*list[campaigns.Contact], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	cs, err := a.Campaigns.ListContacts(ctx, c.actor(ctx), campaigns.ContactFilter{ProjectID: in.ProjectID, Number: in.Number, ExternalID: in.ExternalID}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(x campaigns.Contact) string { return x.ID }), nil
}

type createContactIn struct {
	Body campaigns.ContactCreate `body:"required"`
}

func (a *API) createContact(ctx context.Context, c *call, in *createContactIn) (*campaigns.Contact, error) {
	x, err := a.Campaigns.CreateContact(ctx, c.actor(ctx), in.Body)
	return &x, err
}

type contactIn struct {
	ID string `path:"contact_id" format:"uuid" doc:"The contact."`
}

func (a *API) getContact(ctx context.Context, c *call, in *contactIn) (*campaigns.Contact, error) {
	x, err := a.Campaigns.GetContact(ctx, c.actor(ctx), in.ID)
	return &x, err
}

type updateContactIn struct {
	ID   string                  `path:"contact_id" format:"uuid" doc:"The contact."`
	Body campaigns.ContactUpdate `body:"required"`
}

func (a *API) updateContact(ctx context.Context, c *call, in *updateContactIn) (*campaigns.Contact, error) {
	x, err := a.Campaigns.UpdateContact(ctx, c.actor(ctx), in.ID, in.Body)
	return &x, err
}

func (a *API) deleteContact(ctx context.Context, c *call, in *contactIn) (*campaigns.ContactDeleted, error) {
	x, err := a.Campaigns.DeleteContact(ctx, c.actor(ctx), in.ID)
	return &x, err
}

type importContactsIn struct {
	ProjectID string                 `query:"project_id" format:"uuid" doc:"The project to import into; the first the key reaches when omitted."`
	Body      campaigns.ImportUpload `body:"required"` // the file, read by readImport
}

func (a *API) importContacts(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *importContactsIn) error {
	format, data, err := readImport(w, r)
	if err != nil {
		return err
	}
	var project *string
	if in.ProjectID != "" {
		project = &in.ProjectID
	}
	res, err := a.Campaigns.Import(ctx, c.actor(ctx), project, format, data)
	if err != nil {
		return err
	}
	return a.writeAnswer(ctx, w, c, &res)
}

// readImport reads an import's file: the body itself (text/csv, application/x-ndjson or
// application/jsonl), or the part named file of a multipart/form-data body (CSV unless the
// part says JSON lines).
func readImport(w http.ResponseWriter, r *http.Request) (string, []byte, error) {
	tooLarge := fault.E(fault.CodeBodyTooLarge, "An import is at most %d bytes.", importMaxBody)
	if r.ContentLength > importMaxBody {
		return "", nil, tooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, importMaxBody)
	read := func(rd io.Reader) ([]byte, error) {
		b, err := io.ReadAll(rd)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return b, err
	}
	formatOf := func(mt string) (string, bool) {
		switch mt {
		case "text/csv", "text/plain", "application/csv":
			return campaigns.FormatCSV, true
		case "application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines":
			return campaigns.FormatJSONL, true
		}
		return "", false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil {
		if f, ok := formatOf(mt); ok {
			b, err := read(r.Body)
			return f, b, err
		}
	}
	if err != nil || mt != "multipart/form-data" {
		return "", nil, fault.E(fault.CodeUnsupportedMediaType, "Send the file as text/csv or application/x-ndjson, or as multipart/form-data with a part named file (got %q).", r.Header.Get("Content-Type"))
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return "", nil, fault.E(fault.CodeUnsupportedMediaType, "The body is not multipart/form-data: %v.", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return "", nil, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: jsoncheck.CodeRequired, Detail: "The upload needs a part named file."})
		}
		if err != nil {
			return "", nil, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "malformed", Detail: "The multipart body cannot be read: " + err.Error()})
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		f := campaigns.FormatCSV
		pmt, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if pf, ok := formatOf(pmt); ok {
			f = pf
		} else if name := strings.ToLower(part.FileName()); strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".ndjson") {
			f = campaigns.FormatJSONL
		}
		b, err := read(part)
		if err != nil {
			return "", nil, fmt.Errorf("read import: %w", err)
		}
		return f, b, nil
	}
}

type listDoNotCallIn struct {
	listQuery
	Prefix string `query:"number_prefix" doc:"Only numbers that start with this, such as +1415."`
}

func (a *API) listDoNotCall(ctx context.Context, c *call, in *listDoNotCallIn) (*list[campaigns.DoNotCall], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ds, err := a.Campaigns.ListDoNotCall(ctx, c.actor(ctx), in.Prefix, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ds, func(x campaigns.DoNotCall) string { return x.Number }), nil
}

type addDoNotCallIn struct {
	Body campaigns.DoNotCallCreate `body:"required"`
}

func (a *API) addDoNotCall(ctx context.Context, c *call, in *addDoNotCallIn) (*campaigns.DoNotCall, error) {
	x, _, err := a.Campaigns.AddDoNotCall(ctx, c.actor(ctx), in.Body)
	return &x, err
}

type removeDoNotCallIn struct {
	Number string `path:"number" doc:"The number, E.164."`
}

func (a *API) removeDoNotCall(ctx context.Context, c *call, in *removeDoNotCallIn) (*campaigns.DoNotCallRemoved, error) {
	x, err := a.Campaigns.RemoveDoNotCall(ctx, c.actor(ctx), in.Number)
	return &x, err
}
