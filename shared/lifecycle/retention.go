package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// Retention deletes idle chats: a chat whose last append is older than its
// retention (its own setting, else its tenant's default) is deleted, with
// its images, as DELETE deletes it. A sweep finds them (sweep.go): the
// local server runs one every hour, and in AWS a schedule puts
// {"kind":"expire"} on the build queue every hour. DynamoDB's TTL does not
// fit here: it drops one item and tells no one, while a chat is many items
// and its images; it does expire the receipt records.

// MaxRetentionDays bounds a retention setting (100 years).
const MaxRetentionDays = 36500

func settingsKey(tenant string) store.Key {
	return store.Key{PK: store.IndexPK(tenant), SK: store.SettingsSK}
}

// tenantSettings is a tenant's defaults.
type tenantSettings struct {
	RetentionDays int `json:"rd"`
}

// TenantRetention returns the tenant's default retention in days (0: none).
func (c *Chats) TenantRetention(ctx context.Context, tenant string) (int, error) {
	it, err := c.table.Get(ctx, settingsKey(tenant))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lifecycle: reading the settings of tenant: %w", err)
	}
	var s tenantSettings
	if err := json.Unmarshal(it.Body, &s); err != nil {
		return 0, fmt.Errorf("lifecycle: tenant settings are corrupt: %w", err)
	}
	return s.RetentionDays, nil
}

// SetTenantRetention sets the tenant's default retention (0: none).
func (c *Chats) SetTenantRetention(ctx context.Context, tenant string, days int) error {
	if err := c.enroll(ctx, tenant); err != nil {
		return err
	}
	body, err := rawjson.Of(tenantSettings{RetentionDays: days})
	if err != nil {
		return err
	}
	for range indexRetries {
		it, err := c.table.Get(ctx, settingsKey(tenant))
		switch {
		case errors.Is(err, store.ErrNotFound):
			err = c.table.Create(ctx, store.Item{Key: settingsKey(tenant), Body: body})
		case err == nil:
			err = c.table.Update(ctx, store.Item{Key: settingsKey(tenant), Body: body, Version: it.Version + 1})
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			if err != nil {
				return fmt.Errorf("lifecycle: writing the tenant's retention: %w", err)
			}
			return nil
		}
	}
	return store.Unavailable("lifecycle settings", errors.New("too many concurrent writers"))
}

// enroll lists the tenant among those a sweep visits.
func (c *Chats) enroll(ctx context.Context, tenant string) error {
	err := c.table.Create(ctx, store.Item{Key: store.Key{PK: store.RetentionPK, SK: store.RetentionSK(tenant)}, Body: []byte("{}")})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("lifecycle: enrolling the tenant for retention: %w", err)
	}
	return nil
}

// ChatRetention returns the chat's retention: its own, else its tenant's.
func (c *Chats) ChatRetention(ctx context.Context, tenant, chat string) (Retention, error) {
	e, _, err := c.getIndex(ctx, tenant, chat)
	if err != nil {
		return Retention{}, err
	}
	if e.Retention != nil {
		return Retention{Days: *e.Retention}, nil
	}
	days, err := c.TenantRetention(ctx, tenant)
	return Retention{Days: days, Inherited: true}, err
}

// SetChatRetention sets the chat's own retention; nil falls back to its
// tenant's default. It is kept in the chat's index item, which the sweep
// reads; a chat set up before its first append is opened, as an append
// opens it.
func (c *Chats) SetChatRetention(ctx context.Context, tenant, chat string, days *int) error {
	if days != nil {
		if err := c.enroll(ctx, tenant); err != nil {
			return err
		}
	}
	now := c.now().UnixMilli()
	_, err := c.update(ctx, tenant, chat, func(r *chatRecord) error {
		if r.state.Deleting != 0 {
			return deletingError(chat)
		}
		if r.state.Activity != 0 && r.id.Recorded && !r.legacy {
			return errNoChange
		}
		if r.state.Activity == 0 {
			r.state.Activity = now // a chat set up before its first append
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.updateIndex(ctx, tenant, chat, func(e *indexEntry) { e.Retention = days })
}

// days is the chat's retention: its own, else its tenant's default def.
func (e indexEntry) days(def int) int {
	if e.Retention != nil {
		return *e.Retention
	}
	return def
}

// idleAt says of a chat's state whether it is idle past a retention of
// days at now (never, for 0 days).
func idleAt(now time.Time, days int) func(chatState) bool {
	return func(s chatState) bool {
		return s.Activity != 0 && days > 0 && now.Sub(time.UnixMilli(s.Activity)) > time.Duration(days)*24*time.Hour
	}
}

func decodeDays(r *http.Request, allowNull bool) (*int, error) {
	// Raw, so a body without days ({"day": 5}) is told apart from one
	// whose days is null: it is refused, not read as clearing the setting.
	var body struct {
		Days json.RawMessage `json:"days"`
	}
	if err := api.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	null := string(body.Days) == "null"
	if null && allowNull {
		return nil, nil
	}
	if body.Days == nil || null {
		if allowNull {
			return nil, api.BadRequest("days", "days is required: a whole number of days, 0 to keep the chat forever, or null for the tenant's default")
		}
		return nil, api.BadRequest("days", "days is required: a whole number of days, 0 to keep chats forever")
	}
	var days json.Number
	err := json.Unmarshal(body.Days, &days)
	n, nerr := days.Int64()
	if err != nil || nerr != nil || n < 0 || n > MaxRetentionDays {
		return nil, api.BadRequest("days", "days must be a whole number from 0 to %d, not %s", MaxRetentionDays, body.Days)
	}
	d := int(n)
	return &d, nil
}

func (c *Chats) handleGetTenantRetention(w http.ResponseWriter, r *http.Request) error {
	tenant, err := tenantOf(r)
	if err != nil {
		return err
	}
	days, err := c.TenantRetention(r.Context(), tenant)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, Retention{Days: days})
	return nil
}

func (c *Chats) handlePutTenantRetention(w http.ResponseWriter, r *http.Request) error {
	tenant, err := tenantOf(r)
	if err != nil {
		return err
	}
	days, err := decodeDays(r, false)
	if err != nil {
		return err
	}
	if err := c.SetTenantRetention(r.Context(), tenant, *days); err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, Retention{Days: *days})
	return nil
}

func (c *Chats) handleGetChatRetention(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	ret, err := c.ChatRetention(r.Context(), tenant, chat)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, ret)
	return nil
}

func (c *Chats) handlePutChatRetention(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	days, err := decodeDays(r, true)
	if err != nil {
		return err
	}
	if err := c.SetChatRetention(r.Context(), tenant, chat, days); err != nil {
		return err
	}
	return c.handleGetChatRetention(w, r) // the setting as it now stands
}
