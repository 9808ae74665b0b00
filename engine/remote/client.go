package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/engine"
)

// Client talks to a Server.
type Client struct {
	BaseURL string // e.g. "http://127.0.0.1:8080"
	HTTP    *http.Client
	// Secret is the server's secret: it creates and lists episodes and
	// shows their seeds. Seat clients need only their seat's token.
	Secret string
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("remote: HTTP %d: %s", e.Code, e.Message) }

func (c *Client) do(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusUnprocessableEntity {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		return &StatusError{Code: resp.StatusCode, Message: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("remote: decode answer: %w", err)
		}
	}
	return nil
}

// Create starts an episode (with c.Secret) and returns its info with the
// seat tokens and its seed.
func (c *Client) Create(ctx context.Context, req CreateRequest) (EpisodeInfo, error) {
	var info EpisodeInfo
	err := c.do(ctx, http.MethodPost, "/v1/episodes", c.Secret, req, &info)
	return info, err
}

// List returns every episode the server keeps (with c.Secret).
func (c *Client) List(ctx context.Context) ([]EpisodeInfo, error) {
	var out struct {
		Episodes []EpisodeInfo `json:"episodes"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/episodes", c.Secret, nil, &out)
	return out.Episodes, err
}

// Envs describes the server's environments and agent names.
func (c *Client) Envs(ctx context.Context) (EnvsPage, error) {
	var page EnvsPage
	err := c.do(ctx, http.MethodGet, "/v1/envs", "", nil, &page)
	return page, err
}

// Episode returns an episode's public info (with its seed and every token
// when c has the secret).
func (c *Client) Episode(ctx context.Context, id string) (EpisodeInfo, error) {
	var info EpisodeInfo
	err := c.do(ctx, http.MethodGet, "/v1/episodes/"+url.PathEscape(id), c.Secret, nil, &info)
	return info, err
}

// Events reads seat's events after the cursor, waiting up to wait.
func (c *Client) Events(ctx context.Context, id string, seat int, token string, after int64, wait time.Duration) (EventsPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)}}
	if seat >= 0 {
		q.Set("seat", strconv.Itoa(seat))
	}
	var page EventsPage
	err := c.do(ctx, http.MethodGet, "/v1/episodes/"+url.PathEscape(id)+"/events?"+q.Encode(), token, nil, &page)
	return page, err
}

// Act submits an action for the seat of token.
func (c *Client) Act(ctx context.Context, id, token string, a engine.Action) (ActionResult, error) {
	var res ActionResult
	err := c.do(ctx, http.MethodPost, "/v1/episodes/"+url.PathEscape(id)+"/actions", token,
		ActionRequest{NotificationID: a.NotificationID, Action: a.Text}, &res)
	return res, err
}

// Seat plays one seat of an episode with a local agent. Its cursor and view
// survive a disconnect: call Run again with the same Seat to resume.
type Seat struct {
	Client  *Client
	Episode string
	Info    SeatInfo
	Agent   engine.Agent
	// Wait is the long-poll duration (default 10 s).
	Wait time.Duration

	Cursor   int64
	View     []engine.Event
	answered map[string]bool
}

// Run reads events and answers notifications until the episode ends or
// ctx is done. Any error (a dropped connection included) returns; the
// state needed to resume is kept in s.
func (s *Seat) Run(ctx context.Context) error {
	if s.answered == nil {
		s.answered = map[string]bool{}
	}
	wait := s.Wait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	for {
		page, err := s.Client.Events(ctx, s.Episode, s.Info.Index, s.Info.Token, s.Cursor, wait)
		if err != nil {
			return err
		}
		s.View = append(s.View, page.Events...)
		s.Cursor = page.Next
		// Answer only the newest open notification: earlier ones are
		// closed by later events.
		if n := openNotification(s.View); n != nil && !s.answered[n.NotificationID] {
			turn := engine.Turn{
				Notification: engine.Notification{ID: n.NotificationID, Seat: n.Seat, Text: n.Text, Legal: n.Legal, Grammar: n.Grammar, Data: n.Data},
				Seat:         engine.Seat{Index: s.Info.Index, Name: s.Info.Name},
				View:         s.View,
			}
			a, err := s.Agent.Act(ctx, turn)
			if err != nil {
				return err
			}
			if _, err := s.Client.Act(ctx, s.Episode, s.Info.Token, a); err != nil {
				var se *StatusError
				if !errors.As(err, &se) || se.Code != http.StatusConflict {
					return err
				}
				// 409: the notification closed meanwhile (a timeout); go on.
			}
			s.answered[n.NotificationID] = true
		}
		if page.Done {
			return nil
		}
	}
}

// openNotification returns the last notification of view if nothing has
// closed it yet.
func openNotification(view []engine.Event) *engine.Event {
	for i := len(view) - 1; i >= 0; i-- {
		switch view[i].Kind {
		case engine.KindNotification:
			return &view[i]
		case engine.KindAck, engine.KindValidationError, engine.KindDefault, engine.KindOutcome:
			return nil
		}
	}
	return nil
}
