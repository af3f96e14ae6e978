package provisioner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
)

// Client is the Coordinator over HTTP, authenticated by a provisioner token.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer.
type StatusError = apiclient.StatusError

func (c *Client) do(ctx context.Context, path, jobID string, body, out any) error {
	path = strings.Replace(path, "{id}", jobID, 1)
	err := apiclient.Do(ctx, c.HTTP, c.URL, c.Token, http.MethodPost, path, body, out, 0)
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	if se.ErrorCode == sdk.CodeNotOwner {
		return fmt.Errorf("%w (%v)", store.ErrNotOwner, se)
	}
	if se.ErrorCode == sdk.CodeNotFound && jobID != "" {
		// Only the server's own answer about the job: a proxy's 404 has no code, and a server
		// without the endpoint answers unknown_endpoint (either would otherwise drop the outcome).
		return fmt.Errorf("job %s: %w (%v)", jobID, store.ErrNotFound, se)
	}
	return err
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

// Finish implements Coordinator. A server older than nothing_ran refuses the field as unknown
// (400 naming it): the outcome is then sent without it, and that server fails the build with
// o.Error, as it always did.
func (c *Client) Finish(ctx context.Context, jobID, workerID string, o build.Outcome) error {
	req := protocol.FinishRequest{WorkerID: workerID, Canceled: o.Canceled, Error: o.Error, State: o.State, NothingRan: o.NothingRan}
	err := c.do(ctx, protocol.ProvisionerFinishPath, jobID, req, nil)
	var se *StatusError
	if req.NothingRan && errors.As(err, &se) && se.Code == http.StatusBadRequest && strings.Contains(se.Body, `"nothing_ran"`) {
		req.NothingRan = false
		err = c.do(ctx, protocol.ProvisionerFinishPath, jobID, req, nil)
	}
	return err
}
