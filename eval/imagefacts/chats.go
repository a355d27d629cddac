package imagefacts

import (
	"encoding/base64"
	"fmt"

	"github.com/durachat/durachat/shared/pi"
)

// Shape of the evaluation: every fact's image is sent in PerImage
// conversations, and each conversation is one chat of ChatEntries entries,
// a power of two, so its root is one node covering all of it.
const (
	PerImage    = 3
	ChatEntries = 8
	RootLevel   = 3 // 1 << RootLevel == ChatEntries
)

// Conversation is one chat: the user sends one image among ordinary talk.
type Conversation struct {
	Chat string
	// Fact indexes the catalog: the image this chat sends.
	Fact int
	// Slot is the entry of the message that carries the image (even: the
	// user's turn); the assistant's answer after it does not restate the fact.
	Slot     int
	Messages []pi.Message
}

// Conversations builds PerImage conversations for each fact, with the
// image (PNG bytes, one per fact, in catalog order) at a different entry
// each time, so leaves on both sides of a pair and in every quarter of the
// tree are measured. Each message logs as exactly one entry.
func Conversations(facts []Fact, pngs [][]byte) ([]Conversation, error) {
	if len(facts) != len(pngs) {
		return nil, fmt.Errorf("imagefacts: %d facts but %d images", len(facts), len(pngs))
	}
	var out []Conversation
	for round := 0; round < PerImage; round++ {
		for i, f := range facts {
			k := len(out)
			slot := 2 * (k % (ChatEntries / 2))
			c := Conversation{Chat: fmt.Sprintf("imagefacts-%02d", k), Fact: i, Slot: slot}
			for s := 0; s < ChatEntries; s += 2 {
				if s == slot {
					c.Messages = append(c.Messages,
						userImage(f.Caption, pngs[i]),
						assistant(acknowledgements[(k+round)%len(acknowledgements)]))
					continue
				}
				q := (k*3 + s) % len(fillers)
				c.Messages = append(c.Messages, user(fillers[q].ask), assistant(fillers[q].answer))
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func user(text string) pi.Message {
	return pi.Message{Role: pi.RoleUser, Content: pi.Content{IsString: true, Blocks: []pi.Block{pi.TextBlock(text)}}}
}

func assistant(text string) pi.Message {
	return pi.Message{Role: pi.RoleAssistant, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(text)}}}
}

// userImage is a caption and an inline image: the transcript logs both as
// one user entry, the caption and the image's [image <name>] ref.
func userImage(caption string, png []byte) pi.Message {
	return pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: []pi.Block{
		pi.TextBlock(caption),
		{Type: pi.TypeImage, Data: base64.StdEncoding.EncodeToString(png), MimeType: "image/png"},
	}}}
}

// acknowledgements answer an image without saying what it shows, as an
// agent does when it acts on a picture rather than describing it.
var acknowledgements = []string{
	"Thanks, got the image. I'll dig into it and come back with what I find.",
	"Got it. Let me look at this together with the notes from this morning before I suggest anything.",
	"Thanks for sending that. I'll keep it in mind while we go through the rest of the list.",
}

type filler struct{ ask, answer string }

// fillers are ordinary turns. Some are long, over the 512 bytes the
// memory keeps word for word, so merges above them go to the model too.
var fillers = []filler{
	{"Can you remind me what we decided about the release schedule?",
		"We agreed to ship every second Thursday, with a freeze on the Tuesday before. Hotfixes can go out any day if two reviewers sign off."},
	{"What's the best way to structure the onboarding doc for new engineers?",
		"Start with a one-page map of the system: which services exist, who owns each, and where their dashboards live. " +
			"Then a first-week checklist: laptop setup, access requests, the local development loop, and one small starter task with a named buddy. " +
			"Keep reference material (coding standards, the deploy runbook, on-call rules) in separate pages linked from the map, so the onboarding page stays short. " +
			"Finally, ask every new hire to fix one thing in the doc before their second week ends; that keeps it current without a dedicated owner."},
	{"Should we write the migration script in Python or Go?",
		"Go, since the rest of the tooling is Go and the script will need the same database client. Python would be quicker to sketch but harder to keep in CI."},
	{"I'm putting together the agenda for Friday's planning meeting. So far I have the quarterly goals review, a round of team updates, " +
		"a discussion of the hiring plan for the platform group, and twenty minutes for the incident retrospective from two weeks ago. " +
		"I'm worried it's too much for one hour and that the retrospective will get squeezed again like last time. " +
		"Could you suggest an order and rough timings, and tell me what you would move to an async update instead?",
		"Put the retrospective first with 20 minutes, then goals for 15, hiring for 15, and move team updates to a written thread the day before."},
	{"How do I rotate the staging database password without downtime?",
		"Create the new password as a second credential first, so both work at once. Roll it out to the services through the secret store and restart them one at a time, " +
			"checking the connection metrics after each. When every service has reconnected with the new credential, revoke the old one and watch the error rate for a few minutes. " +
			"If anything fails to reconnect, the old credential is still valid until you revoke it, so you can roll that service back without an outage."},
	{"Any tips for keeping pull requests small?",
		"Split refactors from behaviour changes, land feature flags early, and stack dependent changes so each one reviews in under ten minutes."},
	{"What should the on-call handover note contain?",
		"Open incidents and their owners, anything deployed in the last day, alerts that fired but were judged noise, and what you would check first if paged tonight."},
	{"We have three candidate vendors for the log pipeline. The first is cheapest but only keeps data for seven days; the second keeps thirty days and has a good query language " +
		"but charges per query; the third is self-hosted, which means we run it, patch it and size the disks ourselves. Our security team wants ninety days of retention " +
		"for audit logs but does not care about debug logs. What would you weigh, and which would you lean towards?",
		"Split by log class: keep audit logs ninety days in cheap object storage, and send debug logs to the second vendor with thirty days; self-hosting costs more in people than in licences."},
}
