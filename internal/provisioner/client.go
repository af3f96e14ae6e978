package provisioner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
)

// Client is the Coordinator over HTTP, authenticated by a provisioner token.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Body) }

func (c *Client) do(ctx context.Context, path, jobID string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	path = strings.Replace(path, "{id}", jobID, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.URL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		se := &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(msg))}
		if resp.StatusCode == http.StatusConflict && strings.Contains(se.Body, store.ErrNotOwner.Error()) {
			return fmt.Errorf("%w (%v)", store.ErrNotOwner, se)
		}
		if resp.StatusCode == http.StatusNotFound && jobID != "" && strings.Contains(se.Body, `"message":"not found"`) {
			// Only the server's own answer (a proxy's or an older server's 404 would otherwise
			// drop the outcome).
			return fmt.Errorf("job %s: %w (%v)", jobID, store.ErrNotFound, se)
		}
		return se
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func seconds(d time.Duration) int { return max(int(d/time.Second), 0) }

// Acquire implements Coordinator.
func (c *Client) Acquire(ctx context.Context, workerID string, wait time.Duration) (*protocol.ProvisionerJob, error) {
	var out protocol.AcquireResponse
	err := c.do(ctx, protocol.ProvisionerAcquirePath, "", protocol.AcquireRequest{WorkerID: workerID, WaitSeconds: seconds(wait)}, &out)
	return out.Job, err
}

// Heartbeat implements Coordinator.
func (c *Client) Heartbeat(ctx context.Context, jobID, workerID string, wait time.Duration) (bool, error) {
	var out protocol.HeartbeatResponse
	err := c.do(ctx, protocol.ProvisionerHeartbeatPath, jobID, protocol.HeartbeatRequest{WorkerID: workerID, WaitSeconds: seconds(wait)}, &out)
	return out.Canceled, err
}

// AppendLogs implements Coordinator.
func (c *Client) AppendLogs(ctx context.Context, jobID, workerID string, lines []protocol.LogLine) error {
	return c.do(ctx, protocol.ProvisionerLogsPath, jobID, protocol.LogsRequest{WorkerID: workerID, Lines: lines}, nil)
}

// Finish implements Coordinator.
func (c *Client) Finish(ctx context.Context, jobID, workerID string, o build.Outcome) error {
	return c.do(ctx, protocol.ProvisionerFinishPath, jobID, protocol.FinishRequest{WorkerID: workerID, Canceled: o.Canceled, Error: o.Error, State: o.State}, nil)
}
